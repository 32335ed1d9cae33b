//! HTTP itself, on every answer (RFC 9110): what the bytes received say about their own
//! framing and labels, judged apart from what any case reads in them. No I/O: the transport
//! decodes a body with [`decode`] and keeps what it found ([`Coding`]) beside the answer; the
//! rules over the record ([`judge_coding`], [`judge_media_type`]) weigh every answer of the run.

use std::io::Read;

/// How an answer's body was encoded, by its `Content-Encoding` (RFC 9110 §8.4), and what
/// decoding it gave.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum Coding {
    /// No coding named (or `identity`): the bytes are the content.
    #[default]
    Identity,
    /// A coding the harness decodes (`gzip`, `x-gzip`, `deflate`), decoded: the body kept is
    /// the decoded content.
    Decoded(String),
    /// A coding the harness decodes, named by the header, whose bytes do not decode as it says:
    /// the body kept is the bytes as received.
    Undecodable { coding: String, why: String },
    /// A coding the harness does not decode (`br`, `zstd`, several): the body is kept as received
    /// and nothing is judged of it here (RFC 9110 §12.5.3: without `Accept-Encoding`, any coding
    /// is acceptable, so it is no violation either).
    Unknown(String),
}

/// Largest decoded body: a body that inflates past it is cut there (a bound, never a verdict).
pub(crate) const MAX_DECODED: usize = 8 * 1024 * 1024;

/// `body` decoded as `content_encoding` says (RFC 9110 §8.4.1): the content, and how it was
/// coded. A coding that does not decode keeps the bytes as received.
pub(crate) fn decode(content_encoding: Option<&str>, body: Vec<u8>) -> (Vec<u8>, Coding) {
    let named = content_encoding.map(|c| c.trim().to_ascii_lowercase()).filter(|c| !c.is_empty());
    let Some(coding) = named.filter(|c| c != "identity") else { return (body, Coding::Identity) };
    let mut out = Vec::new();
    let read = match coding.as_str() {
        "gzip" | "x-gzip" => {
            flate2::read::GzDecoder::new(body.as_slice()).take(MAX_DECODED as u64).read_to_end(&mut out)
        }
        // RFC 9110 §8.4.1.2: the zlib format; some servers send raw deflate, read as a fallback.
        "deflate" => flate2::read::ZlibDecoder::new(body.as_slice())
            .take(MAX_DECODED as u64)
            .read_to_end(&mut out)
            .or_else(|_| {
                out.clear();
                flate2::read::DeflateDecoder::new(body.as_slice()).take(MAX_DECODED as u64).read_to_end(&mut out)
            }),
        _ => return (body, Coding::Unknown(coding)),
    };
    match read {
        Ok(_) => (out, Coding::Decoded(coding)),
        Err(e) => (body, Coding::Undecodable { coding, why: e.to_string() }),
    }
}

/// Why `status` cannot answer a request of the harness, which sends no `Range` header and no
/// condition (`If-None-Match`, `If-Modified-Since`, ...): a 206 answers a range request only
/// (RFC 9110 §15.3.7, §14.2) and a 304 a conditional one only (§15.4.5); §4.2 and §4.3 answer
/// 200. `None` for any other status: what else a refusal or an error carries is open (§7).
pub(crate) fn status_problem(status: u16) -> Option<String> {
    match status {
        206 => Some(
            "206 Partial Content answers a range request (RFC 9110 §15.3.7), and the request sent no Range header: the \
             answer is the whole page, 200 (§4.3)"
                .to_string(),
        ),
        304 => Some(
            "304 Not Modified answers a conditional request (RFC 9110 §15.4.5), and the request sent no condition \
             (If-None-Match, If-Modified-Since): a client holds no copy to reuse, so it has no answer"
                .to_string(),
        ),
        _ => None,
    }
}

/// Whether `content_type` names a JSON media type (`application/json`, or any `+json` suffix,
/// RFC 6839 §3.1), whatever its parameters.
pub(crate) fn is_json_media_type(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// The problem of an answer's coding, if its header lies about its bytes (RFC 9110 §8.4: the
/// codings named are those applied, so a client that honours it cannot read the content; §4: a
/// response body is JSON).
pub(crate) fn coding_problem(coding: &Coding) -> Option<String> {
    match coding {
        Coding::Undecodable { coding, why } => Some(format!(
            "Content-Encoding: {coding}, but the body does not decode as {coding} ({why}): a client that \
             honours the header cannot read it (RFC 9110 §8.4, §4)"
        )),
        _ => None,
    }
}

/// The problem of a 2xx answer's media type (§4: response bodies are JSON; RFC 9110 §8.3: the
/// `Content-Type` names the media type of the content): a type given that is no JSON type. An
/// answer without one is not judged (RFC 9110 §8.3 lets a recipient sniff; advisory at most).
pub(crate) fn media_type_problem(content_type: Option<&str>) -> Option<String> {
    let given = content_type?;
    (!is_json_media_type(given)).then(|| {
        format!(
            "Content-Type {:?}: a JSON body labelled as another media type, which a client reads by its label \
             (§4: response bodies are JSON; RFC 9110 §8.3)",
            crate::harness::vocab::redact::shorten(given, 80)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn a_coding_is_decoded_or_said_to_lie() {
        assert_eq!(decode(None, b"{}".to_vec()), (b"{}".to_vec(), Coding::Identity));
        assert_eq!(decode(Some("identity"), b"{}".to_vec()).1, Coding::Identity);
        assert_eq!(decode(Some("GZIP"), gzip(b"[1]")), (b"[1]".to_vec(), Coding::Decoded("gzip".into())));
        let (kept, coding) = decode(Some("gzip"), b"{\"a\":1}".to_vec());
        assert_eq!(kept, b"{\"a\":1}");
        assert!(coding_problem(&coding).is_some_and(|p| p.contains("does not decode as gzip")), "{coding:?}");
        assert!(matches!(decode(Some("br"), b"xx".to_vec()).1, Coding::Unknown(_)));
        assert!(coding_problem(&Coding::Unknown("br".into())).is_none());
    }

    #[test]
    fn json_media_types() {
        for ok in ["application/json", "application/json; charset=utf-8", "Application/Problem+JSON"] {
            assert!(media_type_problem(Some(ok)).is_none(), "{ok}");
        }
        for bad in ["text/html; charset=utf-8", "text/plain", "application/octet-stream"] {
            assert!(media_type_problem(Some(bad)).is_some(), "{bad}");
        }
        assert!(media_type_problem(None).is_none());
    }
}
