//! The layout's rules, without a server.

use super::*;

fn names<'n>(blockers: impl Iterator<Item = &'n SequenceNode>) -> Vec<&'n str> {
    blockers.map(|node| node.name.as_str()).collect()
}

#[test]
fn reads_curator_sequences() {
    assert_eq!(sequence_of("_c_0f8e7d6c-1b2a-4c3d-8e9f-000000000000-lock-0000000042", "lock-"), Some(42));
    assert_eq!(sequence_of("lock-0000000007", "lock-"), Some(7));
    assert_eq!(sequence_of("x-lock-2147483648", "lock-"), Some(2_147_483_648));
    assert_eq!(sequence_of("x-lock-00000000010", "lock-"), None, "11 digits: never written by zookeeper");
    assert_eq!(sequence_of("x-lock-0000000000000000010", "lock-"), None, "nor 19");
    assert_eq!(sequence_of("_c_ab-__READ__0000000003", "__READ__"), Some(3));
    assert_eq!(sequence_of("leases", "lock-"), None);
    assert_eq!(sequence_of("x-lock-12", "lock-"), None, "too short to be a server sequence");
    assert_eq!(sequence_of("x-lock-00000000a1", "lock-"), None);
}

#[test]
fn sorts_by_sequence_not_by_name() {
    let children = ["_c_f-lock-0000000003", "_c_a-lock-0000000010", "foreign", "_c_z-lock-0000000001"];
    let nodes = sorted_nodes(children.map(String::from), MUTEX.kinds);
    let sequences: Vec<u64> = nodes.iter().map(|n| n.sequence).collect();
    assert_eq!(sequences, [1, 3, 10]);
    assert_eq!(nodes[0].name, "_c_z-lock-0000000001");
}

#[test]
fn mutex_waits_for_everything_ahead() {
    let children = ["a-lock-0000000001", "b-lock-0000000002", "c-lock-0000000003"];
    let nodes = sorted_nodes(children.map(String::from), MUTEX.kinds);
    assert!(names(MUTEX.blockers(&nodes, 0)).is_empty());
    assert_eq!(names(MUTEX.blockers(&nodes, 2)), ["a-lock-0000000001", "b-lock-0000000002"]);
}

#[test]
fn readers_wait_for_writers_ahead_and_writers_for_everyone() {
    let children =
        ["_c_a-__READ__0000000001", "_c_b-__WRIT__0000000002", "_c_c-__READ__0000000003", "_c_d-__WRIT__0000000004"];
    let nodes = sorted_nodes(children.map(String::from), RW_READ.kinds);
    use ParticipantKind::{Read, Write};
    assert_eq!(nodes.iter().map(|n| n.kind).collect::<Vec<_>>(), [Read, Write, Read, Write]);
    assert!(names(RW_READ.blockers(&nodes, 0)).is_empty(), "the first reader holds");
    assert_eq!(
        names(RW_READ.blockers(&nodes, 2)),
        ["_c_b-__WRIT__0000000002"],
        "a reader behind a writer waits for it only"
    );
    assert_eq!(names(RW_WRITE.blockers(&nodes, 1)), ["_c_a-__READ__0000000001"], "a writer waits for readers ahead");
    assert_eq!(RW_WRITE.blockers(&nodes, 3).count(), 3);
}

#[test]
fn a_downgraded_read_node_sorts_at_its_writers_place() {
    // The writer's task created a read node at the writer's own sequence (CURATOR-621).
    let children = ["_c_w-__WRIT__0000000005", "_c_x-__WRIT__0000000006", "_c_r-__READ__0000000005"];
    let nodes = sorted_nodes(children.map(String::from), RW_WRITE.kinds);
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["_c_r-__READ__0000000005", "_c_w-__WRIT__0000000005", "_c_x-__WRIT__0000000006"]);
    assert_eq!(RW_WRITE.blockers(&nodes, 2).count(), 2, "the next writer waits for the read node too");
}

#[test]
fn only_writers_queue_again_after_a_writer_went_and_grants_are_exclusive_for_mutex_and_writer() {
    use ParticipantKind::{Read, Write};
    assert!(RW_WRITE.rechecks_after(Write));
    assert!(!RW_WRITE.rechecks_after(Read));
    assert!(!RW_READ.rechecks_after(Write));
    assert!(!MUTEX.rechecks_after(ParticipantKind::Mutex));
    assert!(MUTEX.exclusive() && RW_WRITE.exclusive() && SEMAPHORE_REQUEST.exclusive());
    assert!(!RW_READ.exclusive());
}

#[test]
fn a_downgrade_keeps_the_writers_digits() {
    let read = downgraded_read_name("_c_p-", "_c_w-__WRIT__0000000005").unwrap();
    assert_eq!(read, "_c_p-__READ__0000000005");
    assert_eq!(downgraded_read_name("_c_p-", "_c_w-__WRIT__00000000005"), None, "not a write node");
    assert_eq!(downgraded_read_name("_c_p-", "_c_w-lock-0000000005"), None);
}

#[test]
fn recognises_curator_and_kazoo_names() {
    use ParticipantKind::*;
    let main = PLACES[0].kinds;
    let uuid = "0f8e7d6c-1b2a-4c3d-8e9f-000000000000";
    assert_eq!(classify(main, &format!("_c_{uuid}-lock-0000000042")), Some((Mutex, 42)));
    assert_eq!(classify(main, &format!("_c_{uuid}-__READ__0000000003")), Some((Read, 3)));
    assert_eq!(classify(main, &format!("_c_{uuid}-__WRIT__0000000004")), Some((Write, 4)));
    assert_eq!(classify(main, "4b1f0c2d9e8a7b6c5d4e3f2a1b0c9d8e__lock__0000000005"), Some((KazooLock, 5)));
    assert_eq!(classify(main, "4b1f0c2d9e8a7b6c5d4e3f2a1b0c9d8e__rlock__0000000006"), Some((KazooRead, 6)));
    assert_eq!(classify(main, "latch-0000000007"), Some((Unknown, 7)));
    assert_eq!(classify(main, "leases"), None);
    assert_eq!(classify(main, "locks"), None);
    assert_eq!(classify(main, "4b1f0c2d9e8a7b6c5d4e3f2a1b0c9d8e"), None, "kazoo lease: no sequence");
    assert_eq!(classify(PLACES[1].kinds, &format!("_c_{uuid}-lease-0000000008")), Some((Lease, 8)));
    assert_eq!(classify(PLACES[2].kinds, &format!("_c_{uuid}-lock-0000000009")), Some((LeaseRequest, 9)));
}

#[test]
fn trailing_sequences_need_ten_digits() {
    assert!(trailing_sequence("x-0000000001").is_some());
    assert!(trailing_sequence("_c_ab-__READ__0000000005").is_some());
    assert!(trailing_sequence("x-000000001").is_none());
    assert!(trailing_sequence("x-00000000001").is_none(), "eleven");
    assert!(trailing_sequence("worker70000000001").is_none(), "a run of eleven digits");
    assert!(trailing_sequence("orders").is_none());
}

/// Curator orders by the text after the lock name: for sequences of ten digits that is the
/// numeric order; an eleven-digit one would tie with ours by number (or sort before it by text),
/// so it is no lock node at all, for the queues and for `participants`.
#[test]
fn sequences_of_other_lengths_take_no_part() {
    let children = ["_c_b-lock-0000000002", "_c_a-lock-00000000002", "_c_c-lock-0000000003", "_c_d-lock-000000001"];
    let nodes = sorted_nodes(children.map(String::from), MUTEX.kinds);
    assert_eq!(
        nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
        ["_c_b-lock-0000000002", "_c_c-lock-0000000003"]
    );
    let uuid = "0f8e7d6c-1b2a-4c3d-8e9f-000000000000";
    assert_eq!(classify(PLACES[0].kinds, &format!("_c_{uuid}-lock-00000000001")), None);
    assert_eq!(classify(PLACES[1].kinds, &format!("_c_{uuid}-lease-00000000001")), None);
    assert_eq!(classify(PLACES[0].kinds, "4b1f0c2d9e8a7b6c5d4e3f2a1b0c9d8e__lock__00000000005"), None);
}

#[test]
fn finds_the_protected_prefix_of_a_name() {
    let prefix = new_protected_prefix();
    assert_eq!(protected_prefix(&format!("{prefix}lock-0000000007")), Some(prefix.as_str()));
    assert_eq!(protected_prefix("_c_short-lock-0000000007"), None);
    assert_eq!(protected_prefix("__lock__0000000007"), None);
    assert_eq!(protected_prefix("lock-0000000007"), None);
}

#[test]
fn protected_prefixes_look_like_curators_and_differ() {
    let a = new_protected_prefix();
    let b = new_protected_prefix();
    assert_ne!(a, b);
    assert_eq!(a.len(), "_c_".len() + 36 + 1);
    assert!(a.starts_with("_c_") && a.ends_with('-'));
    let uuid = &a[3..39];
    let groups: Vec<usize> = uuid.split('-').map(str::len).collect();
    assert_eq!(groups, [8, 4, 4, 4, 12]);
    assert_eq!(&uuid[14..15], "4", "version 4");
    assert!("89ab".contains(&uuid[19..20]), "RFC 4122 variant");
}

#[test]
fn leases_made_ahead_of_time_share_their_requests_key_and_no_prefix() {
    let request = new_protected_prefix();
    let leases: Vec<String> = (0..3).map(|index| lease_prefix_ahead_of_time(&request, index)).collect();
    let request_name = format!("{request}lock-0000000003");
    for (index, lease) in leases.iter().enumerate() {
        let name = format!("{lease}lease-0000000007");
        assert_eq!(protected_prefix(&name), Some(lease.as_str()), "a protected prefix");
        assert_eq!(request_key(&name), request_key(&request_name));
        assert!(lease.ends_with(&format!("{index:012x}-")));
    }
    assert!(leases[0] != leases[1] && leases[1] != leases[2]);
    let other = format!("{}lease-0000000008", new_protected_prefix());
    assert_ne!(request_key(&other), request_key(&request_name));
    assert_eq!(request_key("lease-0000000009"), None);
}
