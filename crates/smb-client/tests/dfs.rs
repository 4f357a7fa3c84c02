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
