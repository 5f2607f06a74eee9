//! Errors of the mirroring layer: Kafka-named per-request errors (KIP-1279 §6.2) and everything else.

use std::path::PathBuf;

/// The mirror RPCs' error codes, with the seed prototype's names and numbers where it has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MirrorError {
    /// `READ_ONLY_TOPIC`: a produce to a mirror partition that is not STOPPED.
    ReadOnlyTopic,
    /// `INVALID_MIRROR_NAME`.
    InvalidMirrorName,
    /// `UNKNOWN_MIRROR`.
    UnknownMirror,
    /// `TOPIC_ALREADY_IN_MIRROR`.
    TopicAlreadyInMirror,
    /// `TOPIC_NOT_IN_MIRROR`.
    TopicNotInMirror,
    /// `MIRROR_TOPIC_ALREADY_PAUSED`.
    MirrorTopicAlreadyPaused,
    /// `MIRROR_TOPIC_NOT_PAUSED`: resume of a topic that is not paused.
    MirrorTopicNotPaused,
    /// `MIRROR_TOPIC_BEING_REMOVED`: the topic is failing over.
    MirrorTopicBeingRemoved,
    /// `MIRROR_NOT_EMPTY`: a mirror with topics not yet STOPPED.
    MirrorNotEmpty,
    /// P2's CLUSTER_MIRROR_ALREADY_EXISTS (the seed has no code for it).
    MirrorAlreadyExists,
    /// `UNKNOWN_TOPIC_OR_PARTITION`.
    UnknownTopicOrPartition,
    /// `TOPIC_ALREADY_EXISTS`.
    TopicAlreadyExists,
    /// `INVALID_REQUEST`.
    InvalidRequest,
}

impl MirrorError {
    /// The error's name (`READ_ONLY_TOPIC`).
    pub fn name(self) -> &'static str {
        match self {
            MirrorError::ReadOnlyTopic => "READ_ONLY_TOPIC",
            MirrorError::InvalidMirrorName => "INVALID_MIRROR_NAME",
            MirrorError::UnknownMirror => "UNKNOWN_MIRROR",
            MirrorError::TopicAlreadyInMirror => "TOPIC_ALREADY_IN_MIRROR",
            MirrorError::TopicNotInMirror => "TOPIC_NOT_IN_MIRROR",
            MirrorError::MirrorTopicAlreadyPaused => "MIRROR_TOPIC_ALREADY_PAUSED",
            MirrorError::MirrorTopicNotPaused => "MIRROR_TOPIC_NOT_PAUSED",
            MirrorError::MirrorTopicBeingRemoved => "MIRROR_TOPIC_BEING_REMOVED",
            MirrorError::MirrorNotEmpty => "MIRROR_NOT_EMPTY",
            MirrorError::MirrorAlreadyExists => "CLUSTER_MIRROR_ALREADY_EXISTS",
            MirrorError::UnknownTopicOrPartition => "UNKNOWN_TOPIC_OR_PARTITION",
            MirrorError::TopicAlreadyExists => "TOPIC_ALREADY_EXISTS",
            MirrorError::InvalidRequest => "INVALID_REQUEST",
        }
    }

    /// The wire code (seed-era numbers; P2's for the one P2-only error).
    pub fn code(self) -> i16 {
        match self {
            MirrorError::ReadOnlyTopic => 134,
            MirrorError::InvalidMirrorName => 135,
            MirrorError::UnknownMirror => 136,
            MirrorError::TopicAlreadyInMirror => 137,
            MirrorError::TopicNotInMirror => 138,
            MirrorError::MirrorTopicAlreadyPaused => 139,
            MirrorError::MirrorTopicNotPaused => 140,
            MirrorError::MirrorTopicBeingRemoved => 141,
            MirrorError::MirrorNotEmpty => 142,
            MirrorError::MirrorAlreadyExists => 136,
            MirrorError::UnknownTopicOrPartition => 3,
            MirrorError::TopicAlreadyExists => 36,
            MirrorError::InvalidRequest => 42,
        }
    }
}

impl std::fmt::Display for MirrorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Everything that can go wrong in the mirroring layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A refused request, with Kafka's error name.
    #[error("{error}: {message}")]
    Mirror {
        /// Kafka's name for the refusal.
        error: MirrorError,
        /// What was refused and why.
        message: String,
    },
    /// An error of the log layer.
    #[error(transparent)]
    Log(#[from] klog_log::Error),
    /// Writing a KRaft metadata snapshot failed (the error names its path).
    #[error(transparent)]
    KraftWrite(#[from] klog_log::kraft::writer::KraftWriteError),
    /// An I/O failure on a file of the cluster's own (`cluster.json`).
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// `cluster.json` (or another metadata file) does not parse or breaks an invariant.
    #[error("corrupt cluster metadata {path}: {reason}")]
    CorruptMetadata {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A `__mirror_state` record that does not decode.
    #[error("corrupt __mirror_state-{partition} record at offset {offset}: {reason}")]
    CorruptState {
        /// The `__mirror_state` partition.
        partition: usize,
        /// The record's offset.
        offset: i64,
        /// What is wrong.
        reason: String,
    },
    /// A `__consumer_offsets` record that does not decode.
    #[error("corrupt __consumer_offsets-{partition} record at offset {offset}: {reason}")]
    CorruptGroupOffsets {
        /// The `__consumer_offsets` partition.
        partition: i32,
        /// The record's offset.
        offset: i64,
        /// What did not decode.
        reason: String,
    },
    /// The source cluster could not answer.
    #[error("source {source_name}: {message}")]
    Source {
        /// The source, as the mirror names it.
        source_name: String,
        /// What went wrong.
        message: String,
    },
    /// `klog cluster import` refused: the broker's log directory, its metadata or the target is not what
    /// an import takes (the path, and why).
    #[error("cannot import {path}: {reason}")]
    ImportRefused {
        /// The directory or file refused.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A rule that protects data refused to act (for example an LME above every local epoch).
    #[error("{0}")]
    Refused(String),
}

impl Error {
    /// A refusal with Kafka's name.
    pub fn mirror(error: MirrorError, message: impl Into<String>) -> Self {
        Error::Mirror {
            error,
            message: message.into(),
        }
    }

    pub(crate) fn corrupt_state(partition: usize, offset: i64, reason: String) -> Self {
        Error::CorruptState {
            partition,
            offset,
            reason,
        }
    }

    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        Error::Io {
            path: path.to_owned(),
            source,
        }
    }

    /// What was refused and why, without the error name that [`error_name`](Self::error_name) gives (the
    /// `Display` text starts with it): a report of both says the name once. Any other error: its text.
    pub fn message(&self) -> String {
        match self {
            Error::Mirror { message, .. } => message.clone(),
            Error::Log(l) => l.message(),
            other => other.to_string(),
        }
    }

    /// Kafka's error name when there is one (`READ_ONLY_TOPIC`, `UNKNOWN_MIRROR`, ...).
    pub fn error_name(&self) -> Option<&'static str> {
        match self {
            Error::Mirror { error, .. } => Some(error.name()),
            Error::Log(klog_log::Error::Rejected { error, .. }) => Some(error.name()),
            _ => None,
        }
    }
}
