//! The same contract for every backend, plus the simulator's crash and fault semantics.

use super::*;

fn contract(storage: &dyn Storage, dir: &Path) {
    storage.create_dir_all(dir).unwrap();
    let a = dir.join("a");
    let f = storage.create(&a).unwrap();
    assert_eq!(
        storage.create(&a).unwrap_err().kind(),
        io::ErrorKind::AlreadyExists
    );
    f.write_at(b"hello world", 0).unwrap();
    f.write_at(b"W", 6).unwrap();
    assert_eq!(f.len().unwrap(), 11);
    let mut buf = [0u8; 32];
    assert_eq!(f.read_at(&mut buf, 0).unwrap(), 11);
    assert_eq!(&buf[..11], b"hello World");
    assert_eq!(f.read_at(&mut buf, 20).unwrap(), 0);
    f.set_len(5).unwrap();
    f.sync().unwrap();
    assert_eq!(read_file(storage, &a).unwrap().unwrap(), b"hello");
    write_atomic(storage, &dir.join("ckpt"), b"0\n0\n").unwrap();
    assert_eq!(
        storage.list(dir).unwrap(),
        vec!["a".to_string(), "ckpt".to_string()]
    );
    storage.rename(&a, &dir.join("b")).unwrap();
    assert_eq!(
        storage.open(&a).unwrap_err().kind(),
        io::ErrorKind::NotFound
    );
    storage.remove(&dir.join("b")).unwrap();
    storage.sync_dir(dir).unwrap();
    assert_eq!(storage.list(dir).unwrap(), vec!["ckpt".to_string()]);
    assert_eq!(read_file(storage, &dir.join("missing")).unwrap(), None);
}

#[test]
fn std_backend_meets_the_contract() {
    let dir = std::env::temp_dir().join(format!("klog-io-std-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    contract(&StdStorage, &dir);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sim_backend_meets_the_contract() {
    contract(&SimStorage::new(1), Path::new("/sim/dir"));
}

#[test]
fn crash_keeps_only_what_was_synced() {
    let sim = SimStorage::new(7);
    let dir = Path::new("/d");
    sim.create_dir_all(dir).unwrap();
    let f = sim.create(&dir.join("f")).unwrap();
    f.write_at(b"synced", 0).unwrap();
    f.sync().unwrap();
    f.write_at(b" lost", 6).unwrap();
    sim.crash(false);
    assert_eq!(
        sim.list(dir).unwrap(),
        Vec::<String>::new(),
        "the entry itself was never made durable"
    );

    let f = sim.create(&dir.join("f")).unwrap();
    f.write_at(b"synced", 0).unwrap();
    f.sync().unwrap();
    sim.sync_dir(dir).unwrap();
    f.write_at(b" lost", 6).unwrap();
    sim.create(&dir.join("g")).unwrap();
    assert!(f.read_at(&mut [0u8; 4], 0).is_ok());
    sim.crash(false);
    assert!(
        f.read_at(&mut [0u8; 4], 0).is_err(),
        "handles from before the crash are stale"
    );
    assert_eq!(sim.list(dir).unwrap(), vec!["f".to_string()]);
    assert_eq!(read_file(&sim, &dir.join("f")).unwrap().unwrap(), b"synced");
}

#[test]
fn a_torn_write_keeps_a_sector_aligned_prefix() {
    for seed in 1..50 {
        let sim = SimStorage::new(seed);
        let dir = Path::new("/d");
        sim.create_dir_all(dir).unwrap();
        let f = sim.create(&dir.join("f")).unwrap();
        sim.sync_dir(dir).unwrap();
        f.write_at(&vec![1u8; 100], 0).unwrap();
        f.sync().unwrap();
        f.write_at(&vec![2u8; 3000], 100).unwrap();
        sim.crash(true);
        let bytes = read_file(&sim, &dir.join("f")).unwrap().unwrap();
        assert!(
            bytes.len() == 100 || bytes.len() % 512 == 0,
            "len {}",
            bytes.len()
        );
        assert!(bytes[..100].iter().all(|&b| b == 1));
        assert!(bytes[100..].iter().all(|&b| b == 2));
    }
}

#[test]
fn faults_fire_at_the_chosen_operation() {
    let sim = SimStorage::new(3);
    let dir = Path::new("/d");
    sim.create_dir_all(dir).unwrap();
    let f = sim.create(&dir.join("f")).unwrap();
    let next = sim.ops() + 1;
    sim.inject(next, Fault::Enospc);
    sim.inject(next + 1, Fault::ShortWrite);
    sim.inject(next + 2, Fault::Eio);
    assert_eq!(f.write_at(b"x", 0).unwrap_err().raw_os_error(), Some(28));
    assert_eq!(f.len().unwrap(), 0, "a failed write changes nothing");
    assert_eq!(
        f.write_at(&[9u8; 2000], 0).unwrap_err().raw_os_error(),
        Some(5)
    );
    assert_eq!(
        f.len().unwrap(),
        512,
        "a short write keeps a sector-aligned prefix"
    );
    assert_eq!(f.sync().unwrap_err().raw_os_error(), Some(5));
    f.sync().unwrap();
}
