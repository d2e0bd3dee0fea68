//! Every outcome a command can end with, and the one place each becomes a process exit code
//! (as ripgrep maps its outcomes once): commands return an [`Exit`], errors say which they are
//! ([`crate::Error::exit`]), and only [`Exit::code`] knows the numbers. The numbers are the CLI's
//! contract (README, each command's `--help`).

/// How a command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// The work is done and the answer is yes (CONFINED, every check or case passed).
    Success,
    /// The input is fine but the answer is no: NOT CONFINED or NOT PRESENT, a failed check or
    /// smoke case, a library that cannot run on a `--device`, a refused pack.
    No,
    /// Hostile, broken or unsupported input, or a command line that cannot work (smoke: no CUDA
    /// driver or device).
    BadInput,
    /// The tool, or a library it drives, failed.
    Failure,
    /// smoke: every variant works, but a core flag (`torch.cuda.has_magma`) is stale.
    StaleFlag,
}

impl Exit {
    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::No => 1,
            Exit::BadInput => 2,
            Exit::Failure => 3,
            Exit::StaleFlag => 4,
        }
    }

    /// `Success` when `pass`, `No` otherwise: a command whose answer is one yes/no check.
    pub fn pass_or_no(pass: bool) -> Exit {
        if pass { Exit::Success } else { Exit::No }
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(e.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_outcome_has_its_own_code() {
        let all = [
            Exit::Success,
            Exit::No,
            Exit::BadInput,
            Exit::Failure,
            Exit::StaleFlag,
        ];
        let codes: Vec<u8> = all.iter().map(|e| e.code()).collect();
        assert_eq!(codes, [0, 1, 2, 3, 4]);
    }
}
