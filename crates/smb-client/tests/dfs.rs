//! DFS referrals from a real smbd: a share that is a DFS root
//! (`msdfs root = yes`) with a link (`msdfs:` symlink) to a folder of a
//! second share on the same server.

mod common;

use std::time::Duration;

use common::Samba;
use smb_client::dfs::{get_referral, DfsTarget};
use smb_client::session::Session;

fn dfs_server() -> Samba {
    let smb = Samba::start(&["--extra-share", "second", "--share-option", "msdfs root = yes"]);
    let second = std::path::Path::new(smb.get("SMB_DIR")).join("second");
    std::fs::create_dir_all(second.join("data")).unwrap();
    std::fs::create_dir_all(smb.share_path().join("plain")).unwrap();
    std::os::unix::fs::symlink("msdfs:127.0.0.1\\second\\data", smb.share_path().join("link")).unwrap();
    smb
}

#[tokio::test]
async fn a_link_refers_to_its_target_and_the_rest_of_the_path_follows() {
    let smb = dfs_server();
    let s = Session::connect(&smb.config()).await.expect("connect");
    let target = get_referral(&s, "share", "link").await.expect("referral").expect("a link has one");
    assert_eq!(
        target,
        DfsTarget { server: "127.0.0.1".into(), share: "second".into(), path: "data".into(), ttl: target.ttl }
    );
    assert!(target.ttl > Duration::ZERO);
    let deeper = get_referral(&s, "share", "link\\b1\\k").await.expect("referral").expect("below a link");
    assert_eq!((deeper.share.as_str(), deeper.path.as_str()), ("second", "data\\b1\\k"));
}

#[tokio::test]
async fn plain_folders_and_plain_shares_have_no_referral() {
    let smb = dfs_server();
    let s = Session::connect(&smb.config()).await.expect("connect");
    assert_eq!(get_referral(&s, "share", "plain").await.expect("asked"), None);
    assert_eq!(get_referral(&s, "second", "data").await.expect("asked"), None);
}

/// A DFS root share with a link `link` and the shares `second` and
/// `third` (each with `data` and `other`, owned by the share's user), its
/// directory, and a function that points the link at a target
/// (`host\\share\\path`).
fn linked_samba() -> (Samba, std::path::PathBuf, impl Fn(&str)) {
    let smb =
        Samba::start(&["--extra-share", "second", "--extra-share", "third", "--share-option", "msdfs root = yes"]);
    let dir = std::path::PathBuf::from(smb.get("SMB_DIR"));
    for share in ["second", "third"] {
        std::fs::create_dir_all(dir.join(share).join("data")).unwrap();
        std::fs::create_dir_all(dir.join(share).join("other")).unwrap();
        let uid = std::fs::metadata(dir.join(share)).unwrap();
        let _ = std::process::Command::new("chown")
            .args(["-R", &format!("{}", std::os::unix::fs::MetadataExt::uid(&uid))])
            .arg(dir.join(share))
            .status();
    }
    let link = smb.share_path().join("link");
    let point = move |target: &str| {
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(format!("msdfs:{target}"), &link).unwrap();
    };
    (smb, dir, point)
}

/// A pool on a DFS link follows the link when it moves to another share
/// (asked again once the referral is stale), and keeps its target when the
/// link names another path (the store's root is that path).
#[tokio::test]
async fn a_pool_follows_its_link_to_another_share_but_not_to_another_path() {
    use smb_client::dfs::DfsLink;
    use smb_client::{Pool, PoolConfig};
    use std::sync::Arc;

    let (smb, dir, point) = linked_samba();
    point("127.0.0.1\\second\\data");
    let s = Session::connect(&smb.config()).await.expect("connect");
    let first = get_referral(&s, "share", "link").await.expect("referral").expect("a link");
    let dfs = Arc::new(DfsLink::new(smb.config(), "share", "link", first.clone()));
    let mut cfg = PoolConfig::new(DfsLink::client_for(&smb.config(), &first), &first.share, 1);
    cfg.dfs = Some(dfs.clone());
    let pool = Pool::connect(cfg).await.expect("pool");
    pool.get().await.unwrap().write_small("data\\one.txt", b"1", &[]).await.expect("write");
    assert!(dir.join("second/data/one.txt").exists());

    // Moved to another share: new connections go there.
    point("127.0.0.1\\third\\data");
    dfs.expire();
    pool.get().await.unwrap().conn().poison(smb_client::Error::ConnectionLost("test: replace it".into()));
    let t = pool.get().await.expect("a new connection");
    assert_eq!(t.share(), "third");
    t.write_small("data\\two.txt", b"2", &[]).await.expect("write");
    assert!(dir.join("third/data/two.txt").exists());

    // Moved to another path: not followed.
    point("127.0.0.1\\second\\other");
    dfs.expire();
    pool.get().await.unwrap().conn().poison(smb_client::Error::ConnectionLost("test: replace it".into()));
    assert_eq!(pool.get().await.expect("a new connection").share(), "third");
}

/// A pool held to the servers named at startup (`dfs_servers`) does not
/// follow its link to another server (issue 43): its connections fail with
/// `DfsTargetRefused`, while a pool without the limit follows the link
/// there, so the referral itself was usable.
#[tokio::test]
async fn a_pool_held_to_its_servers_does_not_follow_its_link_to_another() {
    use smb_client::dfs::DfsLink;
    use smb_client::{Pool, PoolConfig};
    use std::sync::Arc;

    let (smb, _dir, point) = linked_samba();
    point("127.0.0.1\\second\\data");
    let s = Session::connect(&smb.config()).await.expect("connect");
    let first = get_referral(&s, "share", "link").await.expect("referral").expect("a link");
    let dfs = Arc::new(DfsLink::new(smb.config(), "share", "link", first.clone()));
    let pool_of = |servers: Option<Vec<String>>| {
        let mut cfg = PoolConfig::new(DfsLink::client_for(&smb.config(), &first), &first.share, 1);
        cfg.dfs = Some(dfs.clone());
        cfg.dfs_servers = servers;
        cfg.acquire_timeout = Duration::from_secs(2);
        Pool::connect(cfg)
    };
    let held = pool_of(Some(vec!["127.0.0.1".into()])).await.expect("the server named at startup");
    assert_eq!(held.get().await.unwrap().share(), "second");

    // Moved to a server nobody named (the same smbd, by another name).
    point("localhost\\third\\data");
    dfs.expire();
    held.get().await.unwrap().conn().poison(smb_client::Error::ConnectionLost("test: replace it".into()));
    assert!(held.get().await.is_err(), "the held pool must not connect to localhost");
    match pool_of(Some(vec!["127.0.0.1".into()])).await {
        Err(smb_client::Error::DfsTargetRefused(server)) => assert_eq!(server, "localhost"),
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(p) => panic!("a new held pool connected to {}", p.get().await.unwrap().share()),
    }
    let free = pool_of(None).await.expect("a pool without the limit follows the link");
    assert_eq!(free.get().await.unwrap().share(), "third");
}
