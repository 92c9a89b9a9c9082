//! The operator's command line: `tollgate check`, `explain` and `hash`.
//!
//! Its logic and its usage are [`tollgate::cli`], shared with the npm
//! package's `tollgate` bin for Node (the same code, built for wasm32).

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "admin") {
        // The admin API is HTTP; this binary carries no HTTP client (nor
        // TLS), so the npm package's Node CLI, with fetch built in, has it.
        eprintln!(
            "tollgate admin is a command of the npm package's CLI: npx tollgate admin URL status|ban|override|reset|controls ...\n\
             (the token from TOLLGATE_ADMIN_TOKEN), or call the admin API directly: docs/guide.md, \"The operator console\""
        );
        std::process::exit(2);
    }
    let output = tollgate::cli::run(&args, &native::ThisMachine);
    std::process::exit(native::print(&output));
}

#[cfg(target_arch = "wasm32")]
fn main() {}

/// The CLI's logic is `tollgate::cli`; this binary only reads the machine
/// and prints.
#[cfg(not(target_arch = "wasm32"))]
mod native {
    use std::io::Write;
    use tollgate::cli::{Host, Output};

    /// Files and environment variables of this machine.
    pub struct ThisMachine;

    impl Host for ThisMachine {
        fn read_file(&self, path: &str) -> Result<Vec<u8>, String> {
            std::fs::read(path).map_err(|e| e.to_string())
        }

        fn env_var(&self, name: &str) -> Option<String> {
            std::env::var(name).ok()
        }

        fn now_ms(&self) -> i64 {
            let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
        }
    }

    /// Prints what the run printed, or writes it to the file it names
    /// (`migrate --write`); a closed pipe (`| head`) is not an error worth
    /// a panic. The exit code: the run's, or 1 when the file was not written.
    pub fn print(output: &Output) -> i32 {
        let _ = std::io::stderr().write_all(output.stderr.as_bytes());
        match &output.write {
            Some(path) => match std::fs::write(path, &output.stdout) {
                Ok(()) => output.code,
                Err(e) => {
                    eprintln!("error: {path}: not written: {e}");
                    1
                }
            },
            None => {
                let _ = std::io::stdout().write_all(output.stdout.as_bytes());
                output.code
            }
        }
    }
}
