//! A cluster's tick expires idle producers of every partition it holds (Kafka's periodic
//! `producer.id.expiration.check.interval.ms` task), not only of partitions that receive appends.

mod mirror_support;

use mirror_support::{batch, Env};

#[test]
fn a_tick_expires_producers_idle_past_the_expiration() {
    let env = Env::new();
    let c = env.cluster("a");
    c.create_topic("t", 1, None, &[]).unwrap();
    c.produce("t", 0, &mut batch(7, 0, 0, 3, false, "a"))
        .unwrap();
    let log = c.log("t", 0).unwrap();
    assert_eq!(log.producers().len(), 1);

    // Within producer.id.expiration.ms (a day by default): kept.
    env.clock.advance(60 * 60 * 1000);
    c.tick();
    assert_eq!(log.producers().len(), 1, "an hour idle is not expired");

    // Two days idle, past the check interval: the tick's check removes it, no append needed.
    env.clock.advance(2 * 24 * 60 * 60 * 1000);
    c.tick();
    assert_eq!(
        log.producers().len(),
        0,
        "idle past the expiration, still there"
    );
}
