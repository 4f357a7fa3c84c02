//! ListMultipartUploads: one page of a bucket's uploads, ordered by key,
//! then initiation, then upload ID (AWS's order, made total), after a
//! marker. The records of every bucket's uploads share one directory and
//! their order is not the names', so every record is read; but the
//! directory is read one QUERY_DIRECTORY answer at a time, its records 32
//! at a time, and only the page's `max + 1` first uploads are kept: memory
//! is bounded by the page, not by the number of uploads.

use crate::store::Uploads;
use std::collections::BinaryHeap;

use futures::StreamExt;

use super::multipart::{valid_upload_id, UploadInfo};
use crate::store::share::{self, is_not_found};
use crate::store::StoreResult;

/// Where a page starts: after `key`, or, with an `upload_id` too, after
/// that upload of `key` (ListMultipartUploads' `key-marker` and
/// `upload-id-marker`).
#[derive(Debug, Clone, Default)]
pub struct UploadMarker {
    /// `key-marker`.
    pub key: String,
    /// `upload-id-marker`; ignored without a key.
    pub upload_id: Option<String>,
}

/// An upload's place in the listing's order.
type Place = (String, i64, String);

fn place(u: &UploadInfo) -> Place {
    (u.record.key.clone(), u.record.initiated, u.upload_id.clone())
}

/// The `max + 1` first uploads past the marker, of those offered: a
/// max-heap whose top is dropped once it holds more.
struct FirstUploads {
    max: usize,
    /// The marker's place, once known: uploads at or before it are left out.
    after: Option<MarkerPlace>,
    heap: BinaryHeap<Entry>,
}

/// A marker as a bound on places.
enum MarkerPlace {
    /// Every upload of keys up to and including this one is before it.
    Key(String),
    /// The marker upload's own place.
    Upload(Place),
}

struct Entry(Place, UploadInfo);

impl PartialEq for Entry {
    fn eq(&self, other: &Entry) -> bool {
        self.0 == other.0
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Entry) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Entry) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
}

impl FirstUploads {
    fn new(max: usize, after: Option<MarkerPlace>) -> FirstUploads {
        FirstUploads { max, after, heap: BinaryHeap::new() }
    }

    fn offer(&mut self, u: UploadInfo) {
        let p = place(&u);
        let past = match &self.after {
            None => true,
            Some(MarkerPlace::Key(k)) => p.0.as_str() > k.as_str(),
            Some(MarkerPlace::Upload(m)) => &p > m,
        };
        if past {
            self.heap.push(Entry(p, u));
            if self.heap.len() > self.max + 1 {
                self.heap.pop();
            }
        }
    }

    /// The page, in order, and whether more follow it.
    fn page(self) -> (Vec<UploadInfo>, bool) {
        let mut all: Vec<UploadInfo> = self.heap.into_sorted_vec().into_iter().map(|e| e.1).collect();
        let truncated = all.len() > self.max;
        all.truncate(self.max);
        (all, truncated)
    }
}

impl Uploads {
    /// ListMultipartUploads: at most `max` uploads of `bucket` whose keys
    /// start with `prefix`, after `marker`, in order (key, initiation,
    /// upload ID); and whether more follow. An upload-id-marker that names
    /// no upload of the key-marker (one completed meanwhile) starts at
    /// that key's first upload: none is skipped, some may be listed twice.
    ///
    /// Errors: NoSuchBucket; the share's refusals of the directory read.
    pub async fn list_uploads(
        &self,
        bucket: &str,
        prefix: &str,
        marker: Option<&UploadMarker>,
        max: usize,
    ) -> StoreResult<(Vec<UploadInfo>, bool)> {
        let tree = self.root.tree().await?;
        self.root.check_bucket(&tree, bucket).await?;
        let after = match marker {
            None => None,
            Some(UploadMarker { key, upload_id: None }) => Some(MarkerPlace::Key(key.clone())),
            Some(UploadMarker { key, upload_id: Some(id) }) => {
                Some(MarkerPlace::Upload(match self.upload_record(id).await {
                    Ok(r) if r.bucket == bucket && r.key == *key => (key.clone(), r.initiated, id.clone()),
                    // Gone: from the key's first upload.
                    _ => (key.clone(), i64::MIN, id.clone()),
                }))
            }
        };
        let mut first = FirstUploads::new(max, after);
        let mut dir = match share::DirReader::open(&tree, &self.root.internal("uploads")).await {
            Ok(d) => d,
            Err(e) if is_not_found(&e) => return Ok((Vec::new(), false)),
            Err(e) => return Err(e.into()),
        };
        let read = async {
            while let Some(entries) = dir.next_page().await? {
                let ids = entries.into_iter().map(|e| e.name).filter(|n| valid_upload_id(n));
                let mut records = futures::stream::iter(ids)
                    .map(|id| async move {
                        let r = self.upload_record(&id).await;
                        (id, r)
                    })
                    .buffer_unordered(32);
                while let Some((id, r)) = records.next().await {
                    // An upload completed or aborted meanwhile is not listed.
                    if let Ok(rec) = r {
                        if rec.bucket == bucket && rec.key.starts_with(prefix) {
                            first.offer(UploadInfo { upload_id: id, record: rec });
                        }
                    }
                }
            }
            StoreResult::Ok(())
        };
        let r = read.await;
        let _ = dir.close().await;
        r?;
        Ok(first.page())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::meta::ObjectMeta;
    use crate::store::uploads::multipart::UploadRecord;

    fn upload(key: &str, initiated: i64, id: &str) -> UploadInfo {
        UploadInfo {
            upload_id: id.into(),
            record: UploadRecord {
                bucket: "b".into(),
                key: key.into(),
                meta: ObjectMeta::default(),
                initiated,
                checksum: None,
                sse_c: None,
            },
        }
    }

    fn names(page: &[UploadInfo]) -> Vec<String> {
        page.iter().map(|u| format!("{}@{}/{}", u.record.key, u.record.initiated, u.upload_id)).collect()
    }

    fn offered(max: usize, after: Option<MarkerPlace>) -> (Vec<UploadInfo>, bool) {
        let mut f = FirstUploads::new(max, after);
        // In directory order, not listing order.
        for u in
            [upload("b", 5, "x"), upload("a", 9, "y"), upload("b", 1, "z"), upload("a", 9, "c"), upload("c", 0, "a")]
        {
            f.offer(u);
        }
        f.page()
    }

    #[test]
    fn a_page_holds_the_first_uploads_in_key_initiation_and_id_order() {
        let (page, more) = offered(3, None);
        assert_eq!(names(&page), ["a@9/c", "a@9/y", "b@1/z"]);
        assert!(more);
        let (page, more) = offered(5, None);
        assert_eq!(page.len(), 5);
        assert!(!more);
        let (page, more) = offered(0, None);
        assert!(page.is_empty() && more);
    }

    #[test]
    fn a_page_starts_after_its_marker() {
        let (page, more) = offered(2, Some(MarkerPlace::Key("a".into())));
        assert_eq!(names(&page), ["b@1/z", "b@5/x"]);
        assert!(more);
        // The next page after the last upload of the first.
        let (page, more) = offered(2, Some(MarkerPlace::Upload(("b".into(), 5, "x".into()))));
        assert_eq!(names(&page), ["c@0/a"]);
        assert!(!more);
        // Within one key.
        let (page, _) = offered(1, Some(MarkerPlace::Upload(("a".into(), 9, "c".into()))));
        assert_eq!(names(&page), ["a@9/y"]);
    }
}
