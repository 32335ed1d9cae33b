//! The one seam between the harness and the embedded reference sandbox (the default target):
//! everything the harness names of the sandbox (starting it, driving it through its control
//! handle, the names of its mutants, variants and conditions for the flags) passes here, so the
//! two stay apart (`scripts/layers.py` enforces it).

pub(super) use crate::sandbox::{
    ActionArgs, Conditions, Control, ControlError, Mutant, Sandbox, SandboxConfig, Variant,
};
