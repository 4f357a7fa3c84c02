//! A bucket's notification configuration, in the shape of AWS's
//! PutBucketNotificationConfiguration: which events go to which target,
//! for which keys. The store keeps it on the share as JSON
//! (`Buckets::put_bucket_notifications`); this file says what it means.
//!
//! A configuration (`QueueConfiguration` or `TopicConfiguration`) names its
//! target by an ARN whose last `:`-separated field is the name of a
//! `[targets.NAME]` table (`arn:smbgate:sqs::hooks`), lists event types
//! (`s3:ObjectCreated:Put`, or a family with `*`: `s3:ObjectCreated:*`),
//! and may filter keys by one prefix and one suffix rule. As on AWS, two
//! configurations of one bucket may not share an event type for keys both
//! could match, so an event matches one configuration at most.

use serde::{Deserialize, Serialize};

/// The event types a configuration may name, as AWS lists them. Those the
/// gateway never emits (restores, replication, lifecycle) are accepted and
/// simply never sent.
const EVENT_TYPES: [&str; 30] = [
    "s3:TestEvent",
    "s3:ObjectCreated:*",
    "s3:ObjectCreated:Put",
    "s3:ObjectCreated:Post",
    "s3:ObjectCreated:Copy",
    "s3:ObjectCreated:CompleteMultipartUpload",
    "s3:ObjectRemoved:*",
    "s3:ObjectRemoved:Delete",
    "s3:ObjectRemoved:DeleteMarkerCreated",
    "s3:ObjectRestore:*",
    "s3:ObjectRestore:Post",
    "s3:ObjectRestore:Completed",
    "s3:ObjectRestore:Delete",
    "s3:ReducedRedundancyLostObject",
    "s3:Replication:*",
    "s3:Replication:OperationFailedReplication",
    "s3:Replication:OperationMissedThreshold",
    "s3:Replication:OperationReplicatedAfterThreshold",
    "s3:Replication:OperationNotTracked",
    "s3:LifecycleExpiration:*",
    "s3:LifecycleExpiration:Delete",
    "s3:LifecycleExpiration:DeleteMarkerCreated",
    "s3:LifecycleTransition",
    "s3:IntelligentTiering",
    "s3:ObjectTagging:*",
    "s3:ObjectTagging:Put",
    "s3:ObjectTagging:Delete",
    "s3:ObjectAcl:Put",
    "s3:ObjectCreated:PutRetention",
    "s3:ObjectCreated:PutLegalHold",
];

/// Most configurations one bucket may hold.
pub const MAX_CONFIGURATIONS: usize = 100;

/// How a configuration was given: it is answered back the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    /// A `QueueConfiguration` (`QueueArn`).
    Queue,
    /// A `TopicConfiguration` (`TopicArn`).
    Topic,
}

/// One configuration: events of these types, for keys these filters
/// match, go to the target `target`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    /// Its `Id` (made up if none was given, as AWS does).
    pub id: String,
    /// Queue or Topic.
    pub kind: Kind,
    /// The ARN as given.
    pub arn: String,
    /// The target's name: the ARN's last field.
    pub target: String,
    /// Event types, `*` families included.
    pub events: Vec<String>,
    /// The key prefix filter, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// The key suffix filter, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suffix: Option<String>,
}

/// A bucket's configurations.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rules {
    /// In the order given.
    pub rules: Vec<Rule>,
}

/// Why a configuration is refused: AWS's error code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// `InvalidArgument` or `NotImplemented`.
    pub code: &'static str,
    /// AWS's message.
    pub message: String,
}

fn invalid(message: impl Into<String>) -> Refusal {
    Refusal { code: "InvalidArgument", message: message.into() }
}

/// True if event type `pattern` (a type or a `*` family) covers event
/// type `name` (a type, `s3:ObjectCreated:Put`).
pub fn covers(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(family) => name.starts_with(family),
        None => pattern == name,
    }
}

impl Rule {
    /// True if this configuration wants an event of type `name` (with its
    /// `s3:` prefix) for `key` as the event writes it (URL-encoded, see
    /// `record::encoded_key`: AWS matches filters against that form, so a
    /// space in a filter is written `+`).
    pub fn wants(&self, name: &str, key: &str) -> bool {
        self.events.iter().any(|p| covers(p, name))
            && self.prefix.as_deref().is_none_or(|p| key.starts_with(p))
            && self.suffix.as_deref().is_none_or(|s| key.ends_with(s))
    }

    /// True if some event could match both `self` and `other` (AWS's
    /// overlap: a shared event type, and filters some key passes both).
    fn overlaps(&self, other: &Rule) -> bool {
        let types = self.events.iter().any(|a| other.events.iter().any(|b| covers(a, b) || covers(b, a)));
        let (p1, p2) = (self.prefix.as_deref().unwrap_or(""), other.prefix.as_deref().unwrap_or(""));
        let (s1, s2) = (self.suffix.as_deref().unwrap_or(""), other.suffix.as_deref().unwrap_or(""));
        types && (p1.starts_with(p2) || p2.starts_with(p1)) && (s1.ends_with(s2) || s2.ends_with(s1))
    }
}

impl Rules {
    /// The configuration of a PutBucketNotificationConfiguration request,
    /// its targets checked by `is_target` (a name of a `[targets.NAME]`).
    ///
    /// Errors: AWS's answers: InvalidArgument for an unknown target or a
    /// Lambda destination ("Unable to validate the following destination
    /// configurations"), an event type S3 does not know, a filter rule
    /// other than one prefix and one suffix, overlapping configurations,
    /// or more than [`MAX_CONFIGURATIONS`]; NotImplemented for EventBridge.
    pub fn from_dto(
        c: s3s::dto::NotificationConfiguration,
        is_target: impl Fn(&str) -> bool,
    ) -> Result<Rules, Refusal> {
        if c.event_bridge_configuration.is_some() {
            return Err(Refusal {
                code: "NotImplemented",
                message: "EventBridge destinations are not supported by this gateway".into(),
            });
        }
        if c.lambda_function_configurations.as_ref().is_some_and(|l| !l.is_empty()) {
            return Err(invalid("Unable to validate the following destination configurations"));
        }
        let queues = c
            .queue_configurations
            .unwrap_or_default()
            .into_iter()
            .map(|q| (Kind::Queue, q.id, q.queue_arn, q.events, q.filter));
        let topics = c
            .topic_configurations
            .unwrap_or_default()
            .into_iter()
            .map(|t| (Kind::Topic, t.id, t.topic_arn, t.events, t.filter));
        let mut rules = Vec::new();
        for (kind, id, arn, events, filter) in queues.chain(topics) {
            let target = arn.rsplit(':').next().unwrap_or_default().to_string();
            if !arn.starts_with("arn:") || !is_target(&target) {
                return Err(invalid("Unable to validate the following destination configurations"));
            }
            let events: Vec<String> = events.into_iter().map(String::from).collect();
            if events.is_empty() {
                return Err(invalid("A notification configuration must name at least one event"));
            }
            if let Some(e) = events.iter().find(|e| !EVENT_TYPES.contains(&e.as_str())) {
                return Err(invalid(format!("The event is not supported for notifications: {e}")));
            }
            let (mut prefix, mut suffix) = (None, None);
            let filter_rules = filter.and_then(|f| f.key).and_then(|k| k.filter_rules).unwrap_or_default();
            for r in filter_rules {
                let name = r.name.map(|n| n.as_str().to_ascii_lowercase()).unwrap_or_default();
                let value = r.value.unwrap_or_default();
                let slot = match name.as_str() {
                    "prefix" => &mut prefix,
                    "suffix" => &mut suffix,
                    _ => return Err(invalid("FilterRule name must be either prefix or suffix")),
                };
                if slot.replace(value).is_some() {
                    return Err(invalid(format!("Cannot specify more than one {name} rule in a filter.")));
                }
            }
            let id = id.filter(|i| !i.is_empty()).unwrap_or_else(made_up_id);
            rules.push(Rule { id, kind, arn, target, events, prefix, suffix });
        }
        if rules.len() > MAX_CONFIGURATIONS {
            return Err(invalid(format!("A bucket holds at most {MAX_CONFIGURATIONS} notification configurations")));
        }
        for (i, a) in rules.iter().enumerate() {
            if rules[i + 1..].iter().any(|b| a.overlaps(b)) {
                return Err(invalid(
                    "Configurations overlap. Configurations on the same bucket cannot share a common event type.",
                ));
            }
        }
        Ok(Rules { rules })
    }

    /// The configuration as GetBucketNotificationConfiguration answers it.
    pub fn to_dto(&self) -> s3s::dto::GetBucketNotificationConfigurationOutput {
        use s3s::dto::*;
        let filter = |r: &Rule| {
            let rules: Vec<FilterRule> = [("prefix", &r.prefix), ("suffix", &r.suffix)]
                .into_iter()
                .filter_map(|(n, v)| {
                    v.as_ref()
                        .map(|v| FilterRule { name: Some(FilterRuleName::from(n.to_string())), value: Some(v.clone()) })
                })
                .collect();
            (!rules.is_empty())
                .then_some(NotificationConfigurationFilter { key: Some(S3KeyFilter { filter_rules: Some(rules) }) })
        };
        let events = |r: &Rule| r.events.iter().cloned().map(Event::from).collect::<Vec<_>>();
        let (mut queues, mut topics) = (Vec::new(), Vec::new());
        for r in &self.rules {
            match r.kind {
                Kind::Queue => queues.push(QueueConfiguration {
                    events: events(r),
                    filter: filter(r),
                    id: Some(r.id.clone()),
                    queue_arn: r.arn.clone(),
                }),
                Kind::Topic => topics.push(TopicConfiguration {
                    events: events(r),
                    filter: filter(r),
                    id: Some(r.id.clone()),
                    topic_arn: r.arn.clone(),
                }),
            }
        }
        GetBucketNotificationConfigurationOutput {
            queue_configurations: (!queues.is_empty()).then_some(queues),
            topic_configurations: (!topics.is_empty()).then_some(topics),
            ..Default::default()
        }
    }

    /// The configuration that wants an event of type `name` for `key` (as
    /// the event writes it), if any (at most one: overlaps are refused).
    pub fn wanting(&self, name: &str, key: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.wants(name, key))
    }
}

/// An Id for a configuration given without one (AWS makes one up too).
fn made_up_id() -> String {
    use base64::Engine;
    let bytes: [u8; 18] = rand::random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use s3s::dto::*;

    fn queue(arn: &str, events: &[&str], prefix: Option<&str>, suffix: Option<&str>) -> QueueConfiguration {
        let rules: Vec<FilterRule> = [("prefix", prefix), ("suffix", suffix)]
            .into_iter()
            .filter_map(|(n, v)| v.map(|v| FilterRule { name: Some(n.to_string().into()), value: Some(v.into()) }))
            .collect();
        QueueConfiguration {
            events: events.iter().map(|e| Event::from(e.to_string())).collect(),
            filter: Some(NotificationConfigurationFilter { key: Some(S3KeyFilter { filter_rules: Some(rules) }) }),
            id: None,
            queue_arn: arn.into(),
        }
    }

    fn parse(qs: Vec<QueueConfiguration>) -> Result<Rules, Refusal> {
        let c = NotificationConfiguration { queue_configurations: Some(qs), ..Default::default() };
        Rules::from_dto(c, |t| t == "hooks" || t == "bus")
    }

    #[test]
    fn families_and_filters_select_events() {
        let r = parse(vec![
            queue("arn:smbgate:sqs::hooks", &["s3:ObjectCreated:*"], Some("in/"), Some(".pdf")),
            queue("arn:smbgate:sqs::bus", &["s3:ObjectRemoved:Delete"], None, None),
        ])
        .unwrap();
        assert_eq!(r.wanting("s3:ObjectCreated:Put", "in/a.pdf").map(|r| r.target.as_str()), Some("hooks"));
        assert_eq!(r.wanting("s3:ObjectCreated:Copy", "in/a.pdf").map(|r| r.target.as_str()), Some("hooks"));
        assert!(r.wanting("s3:ObjectCreated:Put", "out/a.pdf").is_none());
        assert!(r.wanting("s3:ObjectCreated:Put", "in/a.txt").is_none());
        assert_eq!(r.wanting("s3:ObjectRemoved:Delete", "x").map(|r| r.target.as_str()), Some("bus"));
        assert!(r.wanting("s3:ObjectRemoved:DeleteMarkerCreated", "x").is_none());
        assert!(r.rules.iter().all(|r| !r.id.is_empty()));
    }

    #[test]
    fn what_aws_refuses_is_refused() {
        let unknown = parse(vec![queue("arn:smbgate:sqs::nowhere", &["s3:ObjectCreated:*"], None, None)]);
        assert_eq!(unknown.unwrap_err().message, "Unable to validate the following destination configurations");
        let bad_event = parse(vec![queue("arn:smbgate:sqs::hooks", &["s3:ObjectMade:*"], None, None)]);
        assert_eq!(bad_event.unwrap_err().code, "InvalidArgument");
        let overlap = parse(vec![
            queue("arn:smbgate:sqs::hooks", &["s3:ObjectCreated:*"], Some("a/"), None),
            queue("arn:smbgate:sqs::bus", &["s3:ObjectCreated:Put"], Some("a/b"), None),
        ]);
        assert!(overlap.unwrap_err().message.starts_with("Configurations overlap"));
        // Disjoint prefixes, or disjoint event types, may share a bucket.
        parse(vec![
            queue("arn:smbgate:sqs::hooks", &["s3:ObjectCreated:*"], Some("a/"), None),
            queue("arn:smbgate:sqs::bus", &["s3:ObjectCreated:Put"], Some("b/"), None),
            queue("arn:smbgate:sqs::bus", &["s3:ObjectRemoved:*"], Some("a/"), None),
        ])
        .unwrap();
        let mut two = queue("arn:smbgate:sqs::hooks", &["s3:ObjectCreated:*"], Some("a/"), None);
        let dup = FilterRule { name: Some("prefix".to_string().into()), value: Some("b/".into()) };
        two.filter.as_mut().unwrap().key.as_mut().unwrap().filter_rules.as_mut().unwrap().push(dup);
        assert_eq!(parse(vec![two]).unwrap_err().message, "Cannot specify more than one prefix rule in a filter.");
    }

    #[test]
    fn a_configuration_reads_back_as_given() {
        let r = parse(vec![queue("arn:smbgate:sqs::hooks", &["s3:ObjectCreated:*"], Some("in/"), None)]).unwrap();
        let out = r.to_dto();
        let q = &out.queue_configurations.unwrap()[0];
        assert_eq!(q.queue_arn, "arn:smbgate:sqs::hooks");
        assert_eq!(q.events[0].as_ref(), "s3:ObjectCreated:*");
        let rules = q.filter.as_ref().unwrap().key.as_ref().unwrap().filter_rules.as_ref().unwrap();
        assert_eq!((rules[0].name.as_ref().unwrap().as_str(), rules[0].value.as_deref()), ("prefix", Some("in/")));
        assert!(out.topic_configurations.is_none());
    }
}
