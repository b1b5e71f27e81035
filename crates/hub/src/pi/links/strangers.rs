//! What strangers on the network may hold of the remote listener ([`super::tcp`]), and what
//! their failures may write to the log.
//!
//! Anyone who can reach the port can open connections. Until a connection has proved the hub
//! secret in its hello it holds an [`Admission`]: at most [`Limits::per_source`] of them from
//! one source (an IPv4 address, an IPv6 /64: what one machine easily has), at most
//! [`Limits::total`] in all, each for at most [`Limits::hello_deadline`] from its accept, the
//! TLS handshake included. When every place is taken, a newcomer takes the place of the oldest
//! connection of the source that holds the most, unless its own source holds as many already
//! (then the newcomer is closed): a source with a single connection on its way (a pi
//! reconnecting) loses it only when every other source holds a single one too, i.e. to a
//! stranger with more addresses than there are places. A connection whose hello is settled
//! gives its place back: peers that proved the secret are never counted.
//!
//! Failures of connections without a hello (handshakes, refused hellos) are logged per source
//! and kind: the first in full, then at most one line per [`Limits::summary_every`] with how
//! many there were ("1,204 failed TLS handshakes from 10.0.0.5 in the last minute"), so a
//! flood of them cannot push the log's history out of its size cap.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

/// How much strangers may hold, and how often their failures are summed up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections without a hello from one source, at most.
    pub per_source: usize,
    /// Connections without a hello in all, at most.
    pub total: usize,
    /// From the accept to a hello, TLS handshake included.
    pub hello_deadline: Duration,
    /// How often repeated failures of one source and kind are summed up in one line.
    pub summary_every: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            per_source: 4,
            total: 64,
            hello_deadline: Duration::from_secs(5),
            summary_every: Duration::from_secs(60),
        }
    }
}

/// (Source, kind) pairs whose failures are counted apart, at most; beyond them, failures are
/// counted per kind as "other addresses" (the log stays bounded whatever the number of
/// addresses).
const SOURCES_COUNTED: usize = 256;

/// Where connections come from, as far as limits go: an IPv4 address (an IPv4-mapped IPv6
/// one too), or an IPv6 address's /64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Source(IpAddr);

impl Source {
    /// The source of `addr`.
    pub fn of(addr: IpAddr) -> Self {
        match addr {
            IpAddr::V4(v4) => Self(IpAddr::V4(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self(IpAddr::V4(v4)),
                None => {
                    let s = v6.segments();
                    Self(IpAddr::V6(Ipv6Addr::new(
                        s[0], s[1], s[2], s[3], 0, 0, 0, 0,
                    )))
                }
            },
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            IpAddr::V4(v4) => write!(f, "{v4}"),
            IpAddr::V6(v6) => write!(f, "{v6}/64"),
        }
    }
}

/// What went wrong with a connection before its hello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Closed at its accept: its source holds all it may, or every place is taken.
    TooMany,
    /// Closed to make room for a connection from a source holding fewer.
    Evicted,
    /// The TLS handshake failed (rustls's words).
    Handshake(String),
    /// The TLS handshake did not end by the deadline.
    SlowHandshake,
    /// Closed by the peer before its hello.
    ClosedBeforeHello,
    /// A hello refused (`code`, the hub's own words for why).
    Refused {
        /// The refusal's code (`hello`, `protocol`, `secret`).
        code: &'static str,
        /// Why, in the hub's words.
        reason: String,
    },
}

/// A failure's kind: what is counted together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    TooMany,
    Evicted,
    Handshake,
    SlowHandshake,
    ClosedBeforeHello,
    Refused(&'static str),
}

impl Failure {
    fn kind(&self) -> Kind {
        match self {
            Self::TooMany => Kind::TooMany,
            Self::Evicted => Kind::Evicted,
            Self::Handshake(_) => Kind::Handshake,
            Self::SlowHandshake => Kind::SlowHandshake,
            Self::ClosedBeforeHello => Kind::ClosedBeforeHello,
            Self::Refused { code, .. } => Kind::Refused(code),
        }
    }

    /// The line of the first of its kind from a source.
    fn log(&self, peer: SocketAddr) {
        match self {
            Self::TooMany => {
                tracing::warn!(peer = %peer, "too many remote connections without a hello; closed this one")
            }
            Self::Evicted => {
                tracing::info!(peer = %peer, "closed a remote connection without a hello to make room for another source's")
            }
            Self::Handshake(e) => {
                tracing::info!(peer = %peer, error = %e, "a remote TLS handshake failed")
            }
            Self::SlowHandshake => {
                tracing::info!(peer = %peer, "a remote TLS handshake took too long")
            }
            // What a pi sees when the certificate is not the one it pinned: it hangs up before
            // its hello, which carries the secret.
            Self::ClosedBeforeHello => {
                tracing::info!(peer = %peer, "a remote connection closed before its hello (a wrong fingerprint on that machine?)")
            }
            Self::Refused { code, reason } => {
                tracing::warn!(peer = %peer, code, reason = %reason, "refused a remote client's hello")
            }
        }
    }
}

impl Kind {
    /// What `n` of them are, in the summary line.
    fn plural(self) -> String {
        match self {
            Self::TooMany => "connections closed at once (too many without a hello)".into(),
            Self::Evicted => "connections without a hello closed to make room".into(),
            Self::Handshake => "failed TLS handshakes".into(),
            Self::SlowHandshake => "TLS handshakes that took too long".into(),
            Self::ClosedBeforeHello => "connections closed before their hello".into(),
            Self::Refused(code) => format!("refused hellos ({code})"),
        }
    }
}

/// `1204` as `1,204`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `60 s` as "minute", else the seconds.
fn period(every: Duration) -> String {
    match every.as_secs() {
        60 => "minute".into(),
        1 => "second".into(),
        s => format!("{s} s"),
    }
}

/// One connection's place.
#[derive(Debug)]
struct Place {
    seq: u64,
    evict: oneshot::Sender<()>,
}

#[derive(Debug, Default)]
struct Places {
    next: u64,
    /// Per source, oldest first.
    held: HashMap<Source, Vec<Place>>,
    total: usize,
}

/// Failures of one source (or of the other addresses: `None`) and kind, since the last line.
#[derive(Debug, Default)]
struct Window {
    total: u64,
    /// Of them, logged in full (the first, in the window that opened with it).
    shown: u64,
}

type WindowKey = (Option<Source>, Kind);

#[derive(Debug)]
struct Inner {
    limits: Limits,
    places: Mutex<Places>,
    windows: Mutex<HashMap<WindowKey, Window>>,
}

/// A lock whose holder panicked is still usable: each critical section leaves the tables
/// whole.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The listener's bookkeeping of strangers (cheap to clone).
#[derive(Debug, Clone)]
pub struct Strangers {
    inner: Arc<Inner>,
}

impl Strangers {
    /// Empty, with `limits`.
    pub fn new(limits: Limits) -> Self {
        Self {
            inner: Arc::new(Inner {
                limits: Limits {
                    per_source: limits.per_source.max(1),
                    total: limits.total.max(1),
                    ..limits
                },
                places: Mutex::new(Places::default()),
                windows: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// A place for a new connection from `peer`, with what resolves (`Ok`) when it must make
    /// room for another (a dropped admission ends it with `Err`); `None`: close it at once.
    pub fn admit(&self, peer: SocketAddr) -> Option<(Admission, oneshot::Receiver<()>)> {
        let source = Source::of(peer.ip());
        let limits = self.inner.limits;
        let mut places = lock(&self.inner.places);
        let mine = places.held.get(&source).map_or(0, Vec::len);
        if mine >= limits.per_source {
            return None;
        }
        if places.total >= limits.total {
            // The source holding the most, the one with the oldest connection among equals.
            let most = places
                .held
                .iter()
                .filter(|(_, held)| !held.is_empty())
                .max_by_key(|(_, held)| (held.len(), std::cmp::Reverse(held[0].seq)))
                .map(|(s, held)| (*s, held.len()));
            match most {
                Some((them, n)) if them != source && n > mine => {
                    if let Some(held) = places.held.get_mut(&them) {
                        let oldest = held.remove(0);
                        if held.is_empty() {
                            places.held.remove(&them);
                        }
                        places.total -= 1;
                        let _ = oldest.evict.send(());
                    }
                }
                _ => return None,
            }
        }
        let seq = places.next;
        places.next += 1;
        let (evict, evicted) = oneshot::channel();
        places
            .held
            .entry(source)
            .or_default()
            .push(Place { seq, evict });
        places.total += 1;
        let admission = Admission {
            strangers: self.clone(),
            source,
            peer,
            seq,
            deadline: Instant::now() + limits.hello_deadline,
        };
        Some((admission, evicted))
    }

    /// Connections without a hello now held (all sources).
    pub fn held(&self) -> usize {
        lock(&self.inner.places).total
    }

    fn release(&self, source: Source, seq: u64) {
        let mut places = lock(&self.inner.places);
        let Some(held) = places.held.get_mut(&source) else {
            return;
        };
        let Some(i) = held.iter().position(|p| p.seq == seq) else {
            return; // evicted: its place went already
        };
        held.remove(i);
        if held.is_empty() {
            places.held.remove(&source);
        }
        places.total -= 1;
    }

    /// Records a failure of a connection from `peer` without a hello: logged when it is the
    /// first of its kind from its source lately, else counted for the summary line.
    pub fn failed(&self, peer: SocketAddr, failure: Failure) {
        let kind = failure.kind();
        let source = Source::of(peer.ip());
        {
            let mut windows = lock(&self.inner.windows);
            let key =
                if windows.contains_key(&(Some(source), kind)) || windows.len() < SOURCES_COUNTED {
                    (Some(source), kind)
                } else {
                    (None, kind)
                };
            if let Some(w) = windows.get_mut(&key) {
                w.total += 1;
                return;
            }
            windows.insert(key, Window { total: 1, shown: 1 });
            self.summarise(key);
        }
        failure.log(peer);
    }

    /// Sums up `key`'s failures every `summary_every` while there are any; the window closes
    /// after one without (the next failure is logged in full again). A timer of its own, off
    /// the data path: nothing waits for it.
    fn summarise(&self, key: WindowKey) {
        let inner: Weak<Inner> = Arc::downgrade(&self.inner);
        let every = self.inner.limits.summary_every;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(inner) = inner.upgrade() else { return };
                let counted = {
                    let mut windows = lock(&inner.windows);
                    let Some(w) = windows.get_mut(&key) else {
                        return;
                    };
                    if w.total == 0 {
                        windows.remove(&key);
                        return;
                    }
                    let counted = (w.total > w.shown).then_some(w.total);
                    *w = Window::default();
                    counted
                };
                let Some(n) = counted else { continue };
                let (from, what) = (
                    key.0
                        .map_or_else(|| "other addresses".to_owned(), |s| s.to_string()),
                    key.1.plural(),
                );
                tracing::warn!(
                    peer = %from,
                    failed = n,
                    "{} {what} from {from} in the last {}",
                    grouped(n),
                    period(every)
                );
            }
        });
    }
}

/// A connection's place among those without a hello: given back when dropped (its hello
/// settled, or the connection over).
#[derive(Debug)]
pub struct Admission {
    strangers: Strangers,
    source: Source,
    peer: SocketAddr,
    seq: u64,
    deadline: Instant,
}

impl Admission {
    /// When the hello must have come (the TLS handshake included).
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The time from the accept to the deadline.
    pub fn limit(&self) -> Duration {
        self.strangers.inner.limits.hello_deadline
    }

    /// The connection failed before its hello (see [`Strangers::failed`]).
    pub fn failed(&self, failure: Failure) {
        self.strangers.failed(self.peer, failure);
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.strangers.release(self.source, self.seq);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn at(ip: &str, port: u16) -> SocketAddr {
        SocketAddr::new(ip.parse().unwrap(), port)
    }

    fn limits(per_source: usize, total: usize) -> Limits {
        Limits {
            per_source,
            total,
            ..Limits::default()
        }
    }

    #[tokio::test]
    async fn one_source_holds_at_most_its_share_and_gets_it_back() {
        let s = Strangers::new(limits(4, 64));
        let held: Vec<_> = (0..4)
            .map(|p| s.admit(at("10.0.0.5", p)).unwrap())
            .collect();
        assert!(s.admit(at("10.0.0.5", 9)).is_none());
        // Another address of the same /64 is the same source; another /64 is not.
        let mut kept = Vec::new();
        let mut v6 = |ip| {
            let got: Vec<_> = (0..4).filter_map(|p| s.admit(at(ip, p))).collect();
            let n = got.len();
            kept.extend(got);
            n
        };
        assert_eq!((v6("2001:db8::1"), v6("2001:db8::2")), (4, 0));
        assert_eq!(v6("2001:db8:0:1::1"), 4);
        drop(held);
        assert_eq!(s.held(), 8);
        assert!(s.admit(at("10.0.0.5", 9)).is_some());
    }

    #[tokio::test]
    async fn when_full_a_newcomer_takes_the_place_of_the_source_holding_the_most() {
        let s = Strangers::new(limits(4, 8));
        let mut flood: Vec<_> = (0..4)
            .map(|p| s.admit(at("10.0.0.5", p)).unwrap())
            .collect();
        flood.extend((0..3).map(|p| s.admit(at("10.0.0.6", p)).unwrap()));
        let (pi, mut pis) = s.admit(at("192.168.1.2", 1)).unwrap();
        assert_eq!(s.held(), 8);
        let first = &mut flood[0].1;
        // A new source makes room: the oldest of 10.0.0.5 goes.
        let _other = s.admit(at("192.168.1.3", 1)).unwrap();
        assert_eq!(first.try_recv(), Ok(()));
        assert!(pis.try_recv().is_err());
        // 10.0.0.5 and 10.0.0.6 hold three each now, as many as a newcomer of theirs would:
        // closed at once; a source with fewer takes a place from them.
        assert!(s.admit(at("10.0.0.6", 9)).is_none());
        let _third = s.admit(at("192.168.1.2", 2)).unwrap();
        assert_eq!(s.held(), 8);
        assert!(
            pis.try_recv().is_err(),
            "the pi's connection kept its place"
        );
        // Hello settled: the place is given back, and the eviction can never come.
        drop(pi);
        assert_eq!(s.held(), 7);
        assert!(pis.try_recv().is_err());
    }

    #[test]
    fn counts_are_written_for_a_person() {
        assert_eq!(grouped(7), "7");
        assert_eq!(grouped(1204), "1,204");
        assert_eq!(grouped(268_000), "268,000");
        assert_eq!(grouped(1_000_000), "1,000,000");
        assert_eq!(
            Source::of("::ffff:10.0.0.5".parse().unwrap()).to_string(),
            "10.0.0.5"
        );
        assert_eq!(
            Source::of("2001:db8::7".parse().unwrap()).to_string(),
            "2001:db8::/64"
        );
    }
}
