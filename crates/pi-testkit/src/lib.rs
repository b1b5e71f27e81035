//! `pi-testkit`: helpers for tests that run the real `pi` coding agent offline, against
//! [`fake_llm`]. Meant as a dev-dependency only.
//!
//! pi itself (with the Node 22 it needs) comes from `scripts/install-test-deps.sh`, which
//! `scripts/test.sh` runs. A test that needs pi starts with [`require_pi`]: it fails loudly when
//! pi is missing, unless `PI_TELEGRAM_SKIP_PI_TESTS=1` says to skip.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! if pi_testkit::require_pi().is_none() {
//!     return Ok(()); // PI_TELEGRAM_SKIP_PI_TESTS=1
//! }
//! let llm = fake_llm::FakeLlm::start_background(fake_llm::FakeLlmConfig::default())?;
//! let env = pi_testkit::PiEnv::new(llm.base_url())?;
//! let out = env.command(["--no-session", "-p", "hello"]).output()?;
//! assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "echo: hello");
//! # Ok(()) }
//! ```

mod env;
mod locate;
mod rpc;

pub use env::{PiEnv, PiEnvError};
pub use locate::{PI_ENV, PiMissing, SKIP_ENV, pi_bin, require_pi, workspace_root};
pub use rpc::{DEFAULT_TIMEOUT, PiRpc, RpcError, message_text};
