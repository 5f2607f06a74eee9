//! Appends (Kafka's `UnifiedLog.append`): as leader (client or coordinator origin), as follower and as
//! mirror, the write-mode check for mirror partitions, and the write of validated batches into the
//! active segment.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::format::{RecordBatchMut, TimestampType};
use crate::txn_index::AbortedTxn;
use crate::validator::{validate, AppendOrigin, ValidatedBatches};
use crate::{Error, KafkaError};
use klog_psm::{ControlKind, ProducerStateManager};

use super::producer_state::{producer_error, summaries};
use super::{LogAppendInfo, PartitionLog, TransactionVersion, WriteMode};

/// Counts an append in progress for as long as it lives.
struct AppendInProgress<'a>(&'a AtomicUsize);

impl<'a> AppendInProgress<'a> {
    fn new(log: &'a PartitionLog) -> Self {
        log.appends_started.fetch_add(1, Ordering::AcqRel);
        log.appends_in_progress.fetch_add(1, Ordering::AcqRel);
        AppendInProgress(&log.appends_in_progress)
    }
}

impl Drop for AppendInProgress<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl PartitionLog {
    /// Appends producer batches as the leader: validated first (nothing is written if any batch fails),
    /// offsets assigned from the log end, the leader epoch stamped; LogAppendTime topics get the append time.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use klog_log::{config::LogConfig, io::StdStorage, partition_log::{OpenOptions, PartitionLog}};
    /// # use klog_log::format::{BatchBuilder, Compression};
    /// # let root = std::env::temp_dir().join(format!("klog-doc-{}-{}", "append", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&root);
    /// # let (log, _) = PartitionLog::open(Arc::new(StdStorage), &root.join("orders-0"), LogConfig::default(), OpenOptions::default())?;
    /// let mut batch = BatchBuilder::new(Compression::Zstd); // base offset 0: the leader assigns offsets
    /// batch.append(1_700_000_000_000, Some(b"k"), Some(b"v1"), &[])?;
    /// batch.append(1_700_000_000_000, Some(b"k"), Some(b"v2"), &[])?;
    /// let info = log.append_as_leader(&mut batch.build()?, 3)?;
    /// assert_eq!((info.first_offset, info.last_offset), (0, 1));
    /// assert_eq!(log.latest_epoch(), Some(3));
    /// # log.close()?;
    /// # std::fs::remove_dir_all(&root).unwrap();
    /// # Ok::<(), klog_log::Error>(())
    /// ```
    pub fn append_as_leader(
        &self,
        batches: &mut [u8],
        leader_epoch: i32,
    ) -> Result<LogAppendInfo, Error> {
        self.append_as_leader_with_origin(batches, leader_epoch, AppendOrigin::Client)
    }

    fn append_as_leader_with_origin_inner(
        &self,
        batches: &mut [u8],
        leader_epoch: i32,
        origin: AppendOrigin,
        transaction_version: TransactionVersion,
    ) -> Result<LogAppendInfo, Error> {
        assert!(
            origin != AppendOrigin::Replication,
            "replication appends go through append_as_follower"
        );
        let _appending = AppendInProgress::new(self);
        let _writer = self.writer();
        if self.write_mode() == WriteMode::ReadOnly {
            // Before the epoch check: a mirror partition refuses every leader append the same way.
            self.check_write_mode(batches, &ValidatedBatches::default(), origin)?;
        }
        if let Some(latest) = self.latest_epoch().filter(|e| leader_epoch < *e) {
            return Err(Error::rejected(
                KafkaError::FencedLeaderEpoch,
                format!(
                    "leader epoch {leader_epoch} is older than the log's latest epoch {latest}"
                ),
            ));
        }
        let now = self.clock.now_ms();
        let mut validated = validate(batches, origin, &self.config, now)?;
        self.check_write_mode(batches, &validated, origin)?;
        let mut next = self.log_end_offset();
        let first_offset = next;
        let log_append_time =
            (self.config.message_timestamp_type == TimestampType::LogAppendTime).then_some(now);
        // Stamp in place (the CRC was checked once, above) and keep the summaries in step.
        for b in &mut validated.batches {
            // The validator bounds the delta to an i32; the log end may be anywhere up to i64::MAX.
            let delta = b.last_offset - b.base_offset;
            let last = next.checked_add(delta).unwrap_or(i64::MAX);
            let after = offset_after(last)?;
            let mut m =
                RecordBatchMut::parse_unchecked_crc(&mut batches[b.position..b.position + b.size])
                    .expect("validated");
            m.set_base_offset(next);
            m.set_partition_leader_epoch(leader_epoch);
            if let Some(t) = log_append_time {
                m.set_log_append_time(t);
                b.max_timestamp = t;
            } else {
                // The validator's records maximum (Kafka stamps it on CreateTime batches).
                m.set_create_time_max_timestamp(b.max_timestamp);
            }
            (b.base_offset, b.last_offset, b.partition_leader_epoch) = (next, last, leader_epoch);
            next = after;
        }
        let psm_origin = match origin {
            AppendOrigin::Client => klog_psm::AppendOrigin::Client,
            _ => klog_psm::AppendOrigin::Coordinator,
        };
        let mut psm = self.psm();
        let plan = psm
            .plan_append_with_transaction_version(
                &summaries(batches, &validated),
                psm_origin,
                transaction_version,
            )
            .map_err(producer_error)?;
        if let Some(d) = plan.duplicate {
            return Ok(LogAppendInfo {
                first_offset: d.first_offset,
                last_offset: d.last_offset,
                max_timestamp: d.timestamp,
                log_append_time: d.timestamp,
                batches: validated.batches.len(),
                bytes: 0,
                duplicate: true,
            });
        }
        // Before the write, as Kafka's `UnifiedLog.append` does: a checkpoint that cannot be written
        // fails the append while its batch is still nowhere (not in the log, not in a segment's tail
        // that a drop or a later flush could write out).
        if leader_epoch >= 0 {
            let mut epochs = self.epochs();
            if epochs.latest().is_none_or(|l| l.epoch != leader_epoch) {
                epochs.assign(leader_epoch, first_offset)?;
            }
        }
        let info = self.write_batches(batches, &validated, now, &mut psm)?;
        self.apply_producer_state(&mut psm, plan, info.last_offset)?;
        drop(psm);
        Ok(LogAppendInfo {
            log_append_time: log_append_time.unwrap_or(-1),
            ..info
        })
    }

    fn append_as_follower_inner(&self, batches: &[u8]) -> Result<LogAppendInfo, Error> {
        let _appending = AppendInProgress::new(self);
        let _writer = self.writer();
        let now = self.clock.now_ms();
        let validated = validate(batches, AppendOrigin::Replication, &self.config, now)?;
        for b in &validated.batches {
            offset_after(b.last_offset)?;
        }
        let first = validated.batches[0].base_offset;
        let leo = self.log_end_offset();
        if first < leo {
            return Err(Error::rejected(
                KafkaError::UnexpectedAppendOffset,
                format!("first offset {first} is below the log end offset {leo}"),
            ));
        }
        let mut psm = self.psm();
        let plan = psm
            .plan_append(
                &summaries(batches, &validated),
                klog_psm::AppendOrigin::Replication,
            )
            .map_err(producer_error)?;
        {
            let mut epochs = self.epochs();
            for b in &validated.batches {
                if b.magic >= 2 && b.partition_leader_epoch >= 0 {
                    epochs.assign(b.partition_leader_epoch, b.base_offset)?;
                }
            }
        }
        let info = self.write_batches(batches, &validated, now, &mut psm)?;
        self.apply_producer_state(&mut psm, plan, info.last_offset)?;
        Ok(info)
    }

    /// After a write: the plan applied, aborted transactions indexed in the segment holding their marker.
    fn apply_producer_state(
        &self,
        psm: &mut ProducerStateManager,
        plan: klog_psm::AppendPlan,
        last_offset: i64,
    ) -> Result<(), Error> {
        let active = self.active_segment();
        for txn in psm.apply(plan) {
            if txn.is_aborted {
                active.append_aborted_txn(AbortedTxn::new(
                    txn.producer_id,
                    txn.first_offset,
                    txn.last_offset,
                    txn.last_stable_offset,
                ))?;
            }
        }
        psm.update_map_end_offset(last_offset + 1);
        psm.on_high_watermark_updated(self.high_watermark());
        Ok(())
    }

    /// Rolls if needed, appends to the active segment, publishes the new log end offset.
    fn write_batches(
        &self,
        bytes: &[u8],
        v: &ValidatedBatches,
        now: i64,
        psm: &mut ProducerStateManager,
    ) -> Result<LogAppendInfo, Error> {
        let first_offset = v.batches[0].base_offset;
        let last_offset = v.batches.last().expect("non-empty").last_offset;
        let max_ts = v.batches.iter().map(|b| b.max_timestamp).fold(-1, i64::max);
        let segment = self.maybe_roll(
            bytes.len() as u64,
            max_ts,
            first_offset,
            last_offset,
            now,
            psm,
        )?;
        segment.append(last_offset, bytes)?;
        self.log_end_offset
            .store(last_offset + 1, Ordering::Release);
        Ok(LogAppendInfo {
            first_offset,
            last_offset,
            max_timestamp: max_ts,
            log_append_time: -1,
            batches: v.batches.len(),
            bytes: bytes.len(),
            duplicate: false,
        })
    }

    /// [`PartitionLog::append_as_leader`] for a given origin: `Coordinator` for transaction markers and
    /// barriers, `Client` for a producer's batches.
    ///
    /// A coordinator's markers are checked under the transaction version 0/1 rule; one that ended the
    /// transaction under version 2 appends with
    /// [`append_as_leader_with_transaction_version`](Self::append_as_leader_with_transaction_version).
    pub fn append_as_leader_with_origin(
        &self,
        batches: &mut [u8],
        leader_epoch: i32,
        origin: AppendOrigin,
    ) -> Result<LogAppendInfo, Error> {
        self.append_as_leader_with_transaction_version(
            batches,
            leader_epoch,
            origin,
            TransactionVersion::UNKNOWN,
        )
    }

    /// Kafka's `appendAsLeader(records, leaderEpoch, origin, ..., transactionVersion)`: the version the
    /// coordinator wrote its markers under, which the bytes do not carry. From version 2 on, a marker
    /// whose producer epoch is not above the producer's is refused (`INVALID_PRODUCER_EPOCH`), unless no
    /// transaction is open and the epoch is the same (a retry of a marker already written).
    pub fn append_as_leader_with_transaction_version(
        &self,
        batches: &mut [u8],
        leader_epoch: i32,
        origin: AppendOrigin,
        transaction_version: TransactionVersion,
    ) -> Result<LogAppendInfo, Error> {
        self.writable("append")?;
        let info = self.guarded(|| {
            self.append_as_leader_with_origin_inner(
                batches,
                leader_epoch,
                origin,
                transaction_version,
            )
        })?;
        self.flush_if_messages_due()?;
        self.maybe_expire_producers();
        Ok(info)
    }

    /// Which leader appends the log admits now (a mirror partition is read-only).
    pub fn write_mode(&self) -> WriteMode {
        match self.write_mode.load(Ordering::Acquire) {
            1 => WriteMode::ReadOnly,
            2 => WriteMode::BarrierOnly,
            3 => WriteMode::AbortsAndBarrier,
            _ => WriteMode::Writable,
        }
    }

    /// Sets who may append as leader. Follower and mirror appends are never refused by it.
    pub fn set_write_mode(&self, mode: WriteMode) {
        let byte = match mode {
            WriteMode::Writable => 0,
            WriteMode::ReadOnly => 1,
            WriteMode::BarrierOnly => 2,
            WriteMode::AbortsAndBarrier => 3,
        };
        self.write_mode.store(byte, Ordering::Release);
    }

    /// KIP-1279: a mirror partition takes leader appends only once STOPPED; in STOPPING only the
    /// coordinator's MIRROR_PID_RESET barrier (and, for a stop that aborts, its ABORT markers of open
    /// transactions).
    fn check_write_mode(
        &self,
        batches: &[u8],
        validated: &ValidatedBatches,
        origin: AppendOrigin,
    ) -> Result<(), Error> {
        let refuse = match self.write_mode() {
            WriteMode::Writable => return Ok(()),
            WriteMode::ReadOnly => "it is a mirror partition that is not stopped",
            WriteMode::BarrierOnly => {
                let each = summaries(batches, validated);
                let barrier = !each.is_empty() && each.iter().all(|b| b.is_mirror_pid_reset());
                if origin == AppendOrigin::Coordinator && barrier {
                    return Ok(());
                }
                "the mirror partition is stopping: only its MIRROR_PID_RESET barrier is accepted"
            }
            WriteMode::AbortsAndBarrier => {
                let each = summaries(batches, validated);
                // Every batch of the set is the barrier or an ABORT of an open transaction: one other
                // batch beside them is a write the stop did not make.
                let admitted = !each.is_empty()
                    && each.iter().all(|b| {
                        b.is_mirror_pid_reset()
                            || (matches!(b.control, Some(ControlKind::Abort { .. }))
                                && self.has_open_transaction(b.producer_id))
                    });
                if origin == AppendOrigin::Coordinator && admitted {
                    return Ok(());
                }
                "the mirror partition is stopping: only ABORT markers of its open transactions and \
                 its MIRROR_PID_RESET barrier are accepted"
            }
        };
        Err(Error::rejected(
            KafkaError::ReadOnlyTopic,
            format!("{}: {refuse}", self.dir.display()),
        ))
    }

    /// A mirror fetcher's append (KIP-1279 §3.3): the source's batches unchanged, like a follower's
    /// (producer state, epoch cache and `.txnindex` rebuilt from them). An empty log whose first fetched
    /// batch starts below its start (the source's log start fell inside a batch) restarts at that batch,
    /// as Kafka's follower does. The high watermark follows the log end: a mirror has no replicas to wait on.
    pub fn append_as_mirror(&self, batches: &[u8]) -> Result<LogAppendInfo, Error> {
        let info = self.append_as_mirror_unflushed(batches)?;
        self.flush_if_messages_due()?;
        Ok(info)
    }

    /// [`append_as_mirror`](Self::append_as_mirror) without its `flush.messages` check: a mirror's fetch
    /// round appends many partitions and then flushes those whose [`flush_due`](Self::flush_due) holds
    /// together ([`flush_many`](Self::flush_many)), not one sync after each append.
    pub fn append_as_mirror_unflushed(&self, batches: &[u8]) -> Result<LogAppendInfo, Error> {
        self.writable("append")?;
        let leo = self.log_end_offset();
        if leo == self.log_start_offset() {
            if let Ok((first, _)) = crate::format::RecordBatch::parse_unchecked_crc(batches, 0) {
                let (base, last) = (first.base_offset(), first.last_offset());
                if base < leo && last >= leo {
                    self.truncate_fully_and_start_at(base)?;
                }
            }
        }
        let info = self.guarded(|| self.append_as_follower_inner(batches))?;
        self.maybe_expire_producers();
        self.update_high_watermark(self.log_end_offset());
        Ok(info)
    }

    /// Appends a follower's (or mirror's) batches unchanged: offsets, epochs and bytes as they are. The
    /// first batch must not start below the log end offset.
    pub fn append_as_follower(&self, batches: &[u8]) -> Result<LogAppendInfo, Error> {
        self.writable("append")?;
        let info = self.guarded(|| self.append_as_follower_inner(batches))?;
        self.flush_if_messages_due()?;
        self.maybe_expire_producers();
        Ok(info)
    }
}

/// The offset after `last_offset`, which an appended batch may end at: Kafka's offsets stop at i64::MAX, so
/// a batch ending there would leave the log end offset nowhere to go.
fn offset_after(last_offset: i64) -> Result<i64, Error> {
    last_offset.checked_add(1).ok_or_else(|| {
        Error::rejected(
            KafkaError::OffsetOutOfRange,
            format!(
                "offsets end at {}: a batch ending at {last_offset} leaves no log end offset",
                i64::MAX
            ),
        )
    })
}
