//! Pure Rust kernels: no pyo3 in here. Each can be tested and benchmarked
//! without Python.
pub mod ann;
pub mod files;
pub mod fusion;
pub mod quant;
pub mod simd;
pub mod topk;
pub mod vecfile;
