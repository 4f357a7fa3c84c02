//! Byte-range locks (MS-SMB2 LOCK) on a real smbd, as the gateway's key
//! locks rely on them: an exclusive byte is held by one open at a time,
//! whether the other open is on another connection or is the same open
//! asking again; an unlock, or the holder's connection going, frees it.

mod common;

use common::Samba;
use smb_client::{Handle, Session, Tree};
use smb_proto::create::{access, attributes, options, share, CreateRequest, Disposition};
use smb_proto::lock::{decode_lock_response, flags, LockElement, LockRequest, FAIL_IMMEDIATELY};
use smb_proto::NtStatus;

async fn open_locks(t: &Tree) -> Handle {
    let req = CreateRequest {
        name: "key-locks",
        oplock_level: 0,
        desired_access: access::FILE_READ_DATA | access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE,
        file_attributes: attributes::NORMAL,
        share_access: share::READ | share::WRITE,
        disposition: Disposition::OpenIf,
        options: options::NON_DIRECTORY_FILE,
        contexts: &[],
    };
    t.open(&req).await.expect("open the lock file")
}

/// LOCK `flags` on the byte at `offset`: its status.
async fn lock(h: &Handle, offset: u64, flags: u32) -> NtStatus {
    let req = LockRequest { file_id: h.id(), lock: LockElement { offset, length: 1, flags } };
    let answer = h.tree().call(&req).await.expect("LOCK answered");
    if answer.status() == NtStatus::STATUS_SUCCESS {
        answer.body(decode_lock_response).expect("a LOCK response");
    }
    answer.status()
}

const TAKE: u32 = flags::EXCLUSIVE | FAIL_IMMEDIATELY;
const OFFSET: u64 = 0x00ab_cdef_0123; // below 2^40, as the gateway's are

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exclusive_byte_is_held_by_one_open_until_unlocked_or_its_connection_goes() {
    let smb = Samba::start(&[]);
    let one = Session::connect(&smb.config()).await.expect("connect");
    let two = Session::connect(&smb.config()).await.expect("connect");
    let (t1, t2) = (one.tree_connect("share").await.expect("tree"), two.tree_connect("share").await.expect("tree"));
    let (a, b) = (open_locks(&t1).await, open_locks(&t2).await);

    assert_eq!(lock(&a, OFFSET, TAKE).await, NtStatus::STATUS_SUCCESS);
    // Another connection's open, and the same open asking again, are refused.
    assert_eq!(lock(&b, OFFSET, TAKE).await, NtStatus::STATUS_LOCK_NOT_GRANTED);
    assert_eq!(lock(&a, OFFSET, TAKE).await, NtStatus::STATUS_LOCK_NOT_GRANTED);
    // Another byte is another lock.
    assert_eq!(lock(&b, OFFSET + 1, TAKE).await, NtStatus::STATUS_SUCCESS);
    assert_eq!(lock(&b, OFFSET + 1, flags::UNLOCK).await, NtStatus::STATUS_SUCCESS);

    assert_eq!(lock(&a, OFFSET, flags::UNLOCK).await, NtStatus::STATUS_SUCCESS);
    assert_eq!(lock(&b, OFFSET, TAKE).await, NtStatus::STATUS_SUCCESS);
    assert_eq!(lock(&a, OFFSET, TAKE).await, NtStatus::STATUS_LOCK_NOT_GRANTED);

    // The holder's connection goes without unlocking: the byte is free.
    drop(b);
    t2.conn().close();
    let mut status = lock(&a, OFFSET, TAKE).await;
    for _ in 0..50 {
        if status == NtStatus::STATUS_SUCCESS {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        status = lock(&a, OFFSET, TAKE).await;
    }
    assert_eq!(status, NtStatus::STATUS_SUCCESS);
}
