//! The operator commands: each a module that asks the `hub` library (the engine) and prints for
//! a person. `serve` and `demo` run the engine itself and stay beside `main`.

pub mod doctor;
pub mod remote;
pub mod service;
pub mod setup;
pub mod status;
pub mod stop;
pub mod threads;
