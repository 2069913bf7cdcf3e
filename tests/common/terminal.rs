//! A pseudo-terminal for the tests that ask on a terminal: the child's standard input is its
//! terminal side, the test types on the other side, and its standard error is read as it comes
//! (a question ends without a newline).

use std::fs::File;
use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};

/// Long enough for any answer on a loaded 2-core machine; only a hang reaches it.
const PATIENCE: Duration = Duration::from_secs(120);

/// A child process whose standard input is a terminal.
pub struct OnTerminal {
    pub child: Child,
    keyboard: File,
    stderr: Receiver<Vec<u8>>,
    /// Everything the child wrote to standard error so far.
    pub seen: String,
}

impl OnTerminal {
    /// Spawns `command` with a terminal as its standard input, standard output piped.
    pub fn spawn(mut command: Command) -> OnTerminal {
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).expect("open a pty");
        grantpt(&master).unwrap();
        unlockpt(&master).unwrap();
        let name = ptsname(&master, Vec::new()).unwrap();
        // The pty's terminal side is a device of the test's own, not a path beneath a root.
        #[allow(clippy::disallowed_methods)]
        let terminal = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(name.to_str().unwrap())
            .expect("open the pty's terminal side");
        let mut child = command
            .stdin(Stdio::from(terminal))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the child");
        let mut stderr = child.stderr.take().unwrap();
        let (send, received) = channel();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buffer) {
                if n == 0 || send.send(buffer[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        OnTerminal {
            child,
            keyboard: File::from(master),
            stderr: received,
            seen: String::new(),
        }
    }

    /// Waits until standard error has shown `text`.
    pub fn wait_for(&mut self, text: &str) {
        let deadline = Instant::now() + PATIENCE;
        while !self.seen.contains(text) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(bytes) => self.seen.push_str(&String::from_utf8_lossy(&bytes)),
                Err(e) => panic!("waiting for {text:?} ({e:?}); stderr so far: {}", self.seen),
            }
        }
    }

    /// Types `line` and Enter.
    pub fn type_line(&mut self, line: &str) {
        self.keyboard
            .write_all(format!("{line}\n").as_bytes())
            .unwrap();
        self.keyboard.flush().unwrap();
    }

    /// Sends SIGINT, as Ctrl-C on the terminal does.
    pub fn interrupt(&self) {
        rustix::process::kill_process(
            rustix::process::Pid::from_child(&self.child),
            rustix::process::Signal::INT,
        )
        .unwrap();
    }

    /// Waits for the child's exit: its status code and standard output.
    pub fn finish(mut self) -> (Option<i32>, String) {
        let mut stdout = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        let status = self.child.wait().unwrap();
        while let Ok(bytes) = self.stderr.try_recv() {
            self.seen.push_str(&String::from_utf8_lossy(&bytes));
        }
        (status.code(), stdout)
    }
}

/// Runs `command` on a terminal until it asks `question`, presses Ctrl-C, waits for the notice that
/// the cancel is in force, then types `y`: what a user who stopped and then said yes does. Answers
/// the exit code and standard output.
pub fn ctrl_c_then_yes(command: Command, question: &str) -> (Option<i32>, String) {
    let mut terminal = OnTerminal::spawn(command);
    terminal.wait_for(question);
    terminal.interrupt();
    terminal.wait_for("turngate: stopping");
    terminal.type_line("y");
    terminal.finish()
}
