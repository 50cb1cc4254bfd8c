//! Wire contracts of hpcagent.
//!
//! Owns the `.proto` files under `hpcagent/v1/` and the Rust code tonic and prost
//! generate from them at build time (with protox: no `protoc` needed), and
//! the one word each verdict status and grade kind is written as in files,
//! tables and messages (`ok`, `build_error`, `submit`). It holds no other
//! behaviour: services and clients live in the crates that own them.

/// Version 1 of the hpcagent protocol.
pub mod v1 {
    tonic::include_proto!("hpcagent.v1");

    impl Status {
        /// Every status a verdict can have, best first.
        pub const GRADED: [Status; 7] = [
            Status::Ok,
            Status::Overfit,
            Status::Incorrect,
            Status::Crash,
            Status::Timeout,
            Status::BuildError,
            Status::HarnessError,
        ];

        /// The status as it is written: the wire name without its prefix,
        /// in lower case (`STATUS_BUILD_ERROR` is `build_error`).
        pub fn word(self) -> &'static str {
            match self {
                Status::Unspecified => "unspecified",
                Status::Ok => "ok",
                Status::Overfit => "overfit",
                Status::Incorrect => "incorrect",
                Status::Crash => "crash",
                Status::Timeout => "timeout",
                Status::BuildError => "build_error",
                Status::HarnessError => "harness_error",
            }
        }

        /// The status a word names.
        pub fn from_word(word: &str) -> Option<Status> {
            Status::GRADED.into_iter().find(|s| s.word() == word)
        }

        /// A verdict's status as it is written; one a newer judge sent that
        /// this build does not know reads as unspecified.
        pub fn word_of(status: i32) -> &'static str {
            Status::try_from(status)
                .unwrap_or(Status::Unspecified)
                .word()
        }
    }

    impl GradeKind {
        /// The kind as it is written: `score`, `submit`, `profile`.
        pub fn word(self) -> &'static str {
            match self {
                GradeKind::Unspecified => "unspecified",
                GradeKind::Score => "score",
                GradeKind::Submit => "submit",
                GradeKind::Profile => "profile",
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::v1::{GradeKind, Status};

    #[test]
    fn each_word_is_its_wire_name_without_the_prefix() {
        for status in Status::GRADED.into_iter().chain([Status::Unspecified]) {
            let wire = status.as_str_name().trim_start_matches("STATUS_");
            assert_eq!(status.word(), wire.to_ascii_lowercase());
        }
        for kind in [GradeKind::Score, GradeKind::Submit, GradeKind::Profile] {
            let wire = kind.as_str_name().trim_start_matches("GRADE_KIND_");
            assert_eq!(kind.word(), wire.to_ascii_lowercase());
        }
        assert_eq!(Status::from_word("build_error"), Some(Status::BuildError));
        assert_eq!(Status::from_word("STATUS_OK"), None);
        assert_eq!(Status::word_of(99), "unspecified");
    }
}
