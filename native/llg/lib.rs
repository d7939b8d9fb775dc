//! mlxgo-llg is llguidance's C API as one static library: the shim
//! (native/shim/grammar.cpp) calls its `llg_*` functions. Nothing here but the
//! re-export, so the pack carries llguidance's own code unchanged.
pub use llguidance::ffi::*;
