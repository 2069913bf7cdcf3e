//! The subjects, streams and consumers of one deployment, all derived from one prefix (a tenant).
//!
//! With the prefix `P` (default `turngate`):
//!
//! | what | name |
//! |---|---|
//! | jobs subject | `P.jobs` |
//! | jobs stream (work queue, file storage) | `P_jobs` |
//! | the workers' durable pull consumer on it | `workers` |
//! | a job's results subject | `P.results.<job ID>` |
//! | results stream (limits, file storage) | `P_results`, subjects `P.results.>` |
//! | answers to jobs without a usable ID | `P.results._invalid` |
//! | dead letters: JetStream's max-deliveries advisories for the consumer | stream `P_dead` |
//! | questions of `approval = "ask"`, their answers, yeses taken (`approvals.rs`) | `P.approvals.{ask,answer,used}.<sha256>`, stream `P_approvals` |

/// The prefix when none is given.
pub const DEFAULT_PREFIX: &str = "turngate";
/// The durable consumer every worker of a deployment shares, on the jobs and the dead-letter streams.
pub const CONSUMER: &str = "workers";
/// Longest prefix.
const MAX_PREFIX: usize = 64;

/// Every name of one deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    prefix: String,
}

impl Default for Names {
    fn default() -> Self {
        Names {
            prefix: DEFAULT_PREFIX.to_owned(),
        }
    }
}

impl Names {
    /// The names under `prefix`: 1 to 64 ASCII letters, digits, `-` or `_` (one subject token, and
    /// usable in a stream name).
    pub fn new(prefix: &str) -> Result<Names, String> {
        let ok = !prefix.is_empty()
            && prefix.len() <= MAX_PREFIX
            && prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if ok {
            Ok(Names {
                prefix: prefix.to_owned(),
            })
        } else {
            Err(format!(
                "prefix `{prefix}`: expected 1 to {MAX_PREFIX} ASCII letters, digits, `-` or `_`"
            ))
        }
    }

    /// The subject jobs are published on.
    pub fn jobs_subject(&self) -> String {
        format!("{}.jobs", self.prefix)
    }

    /// The work-queue stream holding the jobs.
    pub fn jobs_stream(&self) -> String {
        format!("{}_jobs", self.prefix)
    }

    /// The stream holding every job's results.
    pub fn results_stream(&self) -> String {
        format!("{}_results", self.prefix)
    }

    /// The subjects of the results stream.
    pub fn results_subjects(&self) -> String {
        format!("{}.results.>", self.prefix)
    }

    /// The subject of one job's results.
    pub fn results_subject(&self, job: &str) -> String {
        format!("{}.results.{job}", self.prefix)
    }

    /// The subject of answers to jobs that carry no usable ID.
    pub fn invalid_results_subject(&self) -> String {
        format!("{}.results._invalid", self.prefix)
    }

    /// The stream holding the published approvals.
    pub fn approvals_stream(&self) -> String {
        format!("{}_approvals", self.prefix)
    }

    /// The subjects of the approvals stream.
    pub fn approvals_subjects(&self) -> String {
        format!("{}.approvals.>", self.prefix)
    }

    /// The subject of one approval's `kind` (`ask`, `answer` or `used`).
    pub(crate) fn approval_subject(
        &self,
        kind: &str,
        digest: &crate::digest::Sha256Digest,
    ) -> String {
        format!("{}.approvals.{kind}.{}", self.prefix, digest.hex())
    }

    /// The subjects of every approval's `kind`.
    pub(crate) fn approval_subject_all(&self, kind: &str) -> String {
        format!("{}.approvals.{kind}.*", self.prefix)
    }

    /// The stream capturing the consumer's max-deliveries advisories.
    pub fn dead_stream(&self) -> String {
        format!("{}_dead", self.prefix)
    }

    /// The advisory JetStream publishes when a job was delivered `max_deliver` times without an ack.
    pub fn dead_subject(&self) -> String {
        format!(
            "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{}.{CONSUMER}",
            self.jobs_stream()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::Names;

    #[test]
    fn prefixes_are_one_subject_token() {
        assert!(Names::new("acme-prod_1").is_ok());
        for bad in ["", "a.b", "a*", ">", "a b", &"x".repeat(65)] {
            assert!(Names::new(bad).is_err(), "{bad}");
        }
        let names = Names::new("acme").unwrap();
        assert_eq!(names.jobs_subject(), "acme.jobs");
        assert_eq!(names.results_subject("j1"), "acme.results.j1");
        assert_eq!(
            names.dead_subject(),
            "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.acme_jobs.workers"
        );
    }
}
