//! TREE_CONNECT (MS-SMB2 3.2.4.2.4, 3.2.5.5): a [`Tree`] on a session,
//! checked to be encrypted where the share asks for it and validated
//! against a downgrade. Above both `session` and `tree`, so that neither
//! knows the other's upward side.

use smb_proto::tree::{share_flags, TreeConnectRequest, TreeConnectResponse};

use crate::connection::Op;
use crate::error::{Error, Result};
use crate::session::Session;
use crate::tree::Tree;

impl Session {
    /// TREE_CONNECT to `share` (a share name, e.g. `data`).
    ///
    /// Errors: STATUS_BAD_NETWORK_NAME for a missing share,
    /// STATUS_ACCESS_DENIED, or [`Error::Protocol`] if the share requires
    /// encryption and no cipher was negotiated.
    pub async fn tree_connect(&self, share: &str) -> Result<Tree> {
        let path = format!("\\\\{}\\{}", self.config().server_name, share);
        let req = TreeConnectRequest { path: &path };
        let resp = self.conn.call(Op { body: &req, tree_id: 0 }, false).await?.ok_or_status(&[])?;
        let tc = resp.body(TreeConnectResponse::decode)?;
        let encrypt = tc.share_flags & share_flags::ENCRYPT_DATA != 0 || self.negotiated.encrypt_all;
        if encrypt && self.negotiated.cipher.is_none() {
            return Err(Error::Protocol(format!("share {share} requires encryption, which this session cannot do")));
        }
        self.validate_tree(resp.header.tree_id, encrypt).await?;
        Ok(Tree::new(self.clone(), resp.header.tree_id, encrypt, share.to_string()))
    }
}
