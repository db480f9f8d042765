//! Object stores for the file data of a shared namespace
//! (`shoal_cluster::blob::Blobs`), through the `object_store` crate:
//! S3 and its kin (SeaweedFS, MinIO, Ceph RGW, AWS), and a directory (a
//! file system every daemon mounts, and the tests).
//!
//! The URL a namespace is made with (`shoal mkfs etcd://... --data URL`,
//! recorded in the namespace; `shoal config` changes it):
//! - `s3://BUCKET[/PREFIX][?endpoint=https://H:P][&region=R][&cacert=CA.pem]
//!   [&credentials-file=FILE][&profile=P][&anonymous=1]`: path-style
//!   requests when an endpoint is given; `http://` endpoints only when the
//!   URL says so; the server's certificate checked against the system's
//!   roots and `cacert` (else `AWS_CA_BUNDLE`), named as the etcd URL's
//!   parameter is. Credentials ([`credentials`]): `AWS_ACCESS_KEY_ID` and
//!   `AWS_SECRET_ACCESS_KEY` (and `AWS_SESSION_TOKEN`), else the AWS shared
//!   credentials file (`credentials-file`, else
//!   `AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`; the profile
//!   `profile`, else `AWS_PROFILE`, else `default`). None found is refused,
//!   saying where to put them; unsigned requests only with `anonymous=1`.
//!   The URL never holds a secret (it is recorded and shown): one is refused.
//! - `file:///DIR`: objects as files under DIR.
//!
//! The calls are synchronous (the namespace's operations run on FUSE
//! worker threads): each runs on a runtime of this crate's own.

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use shoal_cluster::blob::Blobs;
use shoal_core::{Error, Result};
use std::sync::Arc;

/// An object store reached through `object_store`.
pub struct ObjectBlobs {
    store: Arc<dyn ObjectStore>,
    /// The same store without retries, for `probe`: a refused certificate
    /// or a server that does not answer is said at once, not after the
    /// minute of back-off the crate gives a transport error.
    probe_store: Arc<dyn ObjectStore>,
    prefix: String,
    rt: tokio::runtime::Runtime,
    url: String,
    /// A `file:///DIR` store's directory (its filesystem's room is the
    /// store's: `Blobs::space`).
    local: Option<std::path::PathBuf>,
}

/// What an `s3://` URL says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct S3Url {
    pub bucket: String,
    pub prefix: String,
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub cacert: Option<String>,
    pub credentials_file: Option<String>,
    pub profile: Option<String>,
    pub anonymous: bool,
}

const S3_USAGE: &str = "s3://BUCKET[/PREFIX][?endpoint=https://H:P&region=R&cacert=CA.pem&credentials-file=FILE&profile=P&anonymous=1]";

/// Where credentials can come from, for the message that says none came.
pub const CREDENTIALS_HELP: &str = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or put them in ~/.aws/credentials (AWS_SHARED_CREDENTIALS_FILE, AWS_PROFILE) or in the file credentials-file=FILE names, or add anonymous=1 to the URL for unsigned requests";

impl S3Url {
    /// Parse `s3://...` (see the crate's comment); Err is a message without
    /// the URL.
    pub fn parse(url: &str) -> std::result::Result<S3Url, String> {
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| format!("expected {S3_USAGE}"))?;
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        if path.contains('@') {
            return Err(format!(
                "credentials do not go in the URL (it is recorded in the namespace and shown): {CREDENTIALS_HELP}"
            ));
        }
        let (bucket, prefix) = path.split_once('/').unwrap_or((path, ""));
        if bucket.is_empty() {
            return Err(format!("no bucket ({S3_USAGE})"));
        }
        let mut u = S3Url {
            bucket: bucket.to_string(),
            prefix: prefix.trim_matches('/').to_string(),
            ..S3Url::default()
        };
        for kv in query.split('&').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            let nonempty = |what: &str| {
                if v.is_empty() {
                    Err(format!("{k}= takes {what}"))
                } else {
                    Ok(Some(v.to_string()))
                }
            };
            match k {
                "endpoint" => {
                    let host = v
                        .strip_prefix("http://")
                        .or_else(|| v.strip_prefix("https://"));
                    if host.is_none_or(|h| h.is_empty()) {
                        return Err(
                            "endpoint= takes http://HOST:PORT or https://HOST:PORT".to_string()
                        );
                    }
                    u.endpoint = Some(v.to_string());
                }
                "region" => u.region = nonempty("a region")?,
                "cacert" => u.cacert = nonempty("a PEM file")?,
                "credentials-file" => u.credentials_file = nonempty("a file")?,
                "profile" => u.profile = nonempty("a profile's name")?,
                "anonymous" => match v {
                    "1" | "true" => u.anonymous = true,
                    "0" | "false" => u.anonymous = false,
                    _ => return Err("anonymous= takes 1 or 0".to_string()),
                },
                _ => {
                    let kl = k.to_ascii_lowercase();
                    if ["secret", "key", "password", "token"]
                        .iter()
                        .any(|s| kl.contains(s))
                    {
                        return Err(format!(
                            "credentials do not go in the URL (it is recorded in the namespace and shown): {CREDENTIALS_HELP}"
                        ));
                    }
                    return Err(format!("unknown option {k:?} ({S3_USAGE})"));
                }
            }
        }
        if u.anonymous && (u.credentials_file.is_some() || u.profile.is_some()) {
            return Err(
                "anonymous=1 sends unsigned requests: it does not go with credentials-file= or profile="
                    .to_string(),
            );
        }
        Ok(u)
    }
}

/// An access key, its secret and a session token.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub key_id: String,
    pub secret: String,
    pub token: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({}, ***)", self.key_id)
    }
}

/// The credentials for `u`, as the AWS tools look for them: the
/// environment, then the shared credentials file. None: unsigned requests,
/// only when the URL says `anonymous=1`. `env` reads a variable (the
/// process's environment but in tests).
pub fn credentials(
    u: &S3Url,
    env: &dyn Fn(&str) -> Option<String>,
) -> std::result::Result<Option<Credentials>, String> {
    if u.anonymous {
        return Ok(None);
    }
    let var = |k: &str| env(k).filter(|v| !v.is_empty());
    match (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY")) {
        (Some(key_id), Some(secret)) => {
            return Ok(Some(Credentials {
                key_id,
                secret,
                token: var("AWS_SESSION_TOKEN"),
            }))
        }
        (Some(_), None) => {
            return Err("AWS_ACCESS_KEY_ID is set but not AWS_SECRET_ACCESS_KEY".into())
        }
        (None, Some(_)) => {
            return Err("AWS_SECRET_ACCESS_KEY is set but not AWS_ACCESS_KEY_ID".into())
        }
        (None, None) => {}
    }
    // A file named (in the URL or the environment) must be there; the
    // default one may be missing.
    let (file, named) = match (
        u.credentials_file.clone(),
        var("AWS_SHARED_CREDENTIALS_FILE"),
    ) {
        (Some(f), _) | (None, Some(f)) => (Some(f), true),
        (None, None) => (var("HOME").map(|h| format!("{h}/.aws/credentials")), false),
    };
    let profile = u
        .profile
        .clone()
        .or_else(|| var("AWS_PROFILE"))
        .unwrap_or_else(|| "default".to_string());
    if let Some(f) = file {
        match std::fs::read_to_string(&f) {
            Ok(text) => {
                return match profile_credentials(&text, &profile) {
                    Some(c) => Ok(Some(c)),
                    None => Err(format!(
                        "credentials file {f}: no profile [{profile}] with aws_access_key_id and aws_secret_access_key"
                    )),
                };
            }
            Err(e) if named || e.kind() != std::io::ErrorKind::NotFound => {
                return Err(format!("credentials file {f}: {e}"))
            }
            Err(_) => {}
        }
    }
    Err(format!(
        "no credentials for the object store: {CREDENTIALS_HELP}"
    ))
}

/// A profile's keys in the AWS shared credentials file (an INI file:
/// `[NAME]`, then `aws_access_key_id = ...`, `aws_secret_access_key = ...`,
/// `aws_session_token = ...`). Read here because `object_store` reads
/// credentials from the environment, instance metadata and web identity
/// only, not from this file, and the AWS SDK is a large dependency for
/// these few lines.
fn profile_credentials(text: &str, profile: &str) -> Option<Credentials> {
    let (mut key_id, mut secret, mut token) = (None, None, None);
    let mut inside = false;
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        if let Some(name) = l.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            // The credentials file names a profile bare; the config file
            // as "profile NAME": take either.
            let name = name.trim();
            inside =
                name == profile || name.strip_prefix("profile ").map(str::trim) == Some(profile);
            continue;
        }
        if !inside {
            continue;
        }
        if let Some((k, v)) = l.split_once('=') {
            let v = Some(v.trim().to_string()).filter(|v| !v.is_empty());
            match k.trim().to_ascii_lowercase().as_str() {
                "aws_access_key_id" => key_id = v,
                "aws_secret_access_key" => secret = v,
                "aws_session_token" => token = v,
                _ => {}
            }
        }
    }
    Some(Credentials {
        key_id: key_id?,
        secret: secret?,
        token,
    })
}

/// The message of an object store error on one line, with its causes (a
/// refused certificate is a cause of a cause) and a hint for the usual
/// ones.
fn one_line(e: &dyn std::error::Error) -> String {
    let mut m = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !m.contains(&t) {
            m = format!("{m}: {t}");
        }
        src = s.source();
    }
    let mut m: String = m.split_whitespace().collect::<Vec<_>>().join(" ");
    if m.len() > 400 {
        let mut i = 400;
        while !m.is_char_boundary(i) {
            i -= 1;
        }
        m.truncate(i);
        m.push_str("...");
    }
    let hint = if m.contains("UnknownIssuer") || m.contains("certificate") {
        " (the server's certificate was not trusted: give its CA with cacert=CA.pem in the URL or AWS_CA_BUNDLE)"
    } else if [
        "403",
        "SignatureDoesNotMatch",
        "InvalidAccessKeyId",
        "AccessDenied",
    ]
    .iter()
    .any(|s| m.contains(s))
    {
        " (the credentials were refused)"
    } else {
        ""
    };
    format!("{m}{hint}")
}

/// `url` as it may be shown: were credentials put in it (refused), masked.
pub fn shown(url: &str) -> String {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let base = match base.split_once("://") {
        Some((scheme, rest)) if rest.contains('@') => {
            format!("{scheme}://***@{}", &rest[rest.rfind('@').unwrap() + 1..])
        }
        _ => base.to_string(),
    };
    let query: Vec<String> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let k = p.split_once('=').map_or(p, |(k, _)| k).to_ascii_lowercase();
            if ["secret", "key", "password", "token"]
                .iter()
                .any(|s| k.contains(s))
            {
                format!("{}=***", p.split_once('=').map_or(p, |(k, _)| k))
            } else {
                p.to_string()
            }
        })
        .collect();
    if query.is_empty() {
        base
    } else {
        format!("{base}?{}", query.join("&"))
    }
}

impl ObjectBlobs {
    /// Open the object store `url` names (see the crate's comment).
    pub fn open(url: &str) -> Result<ObjectBlobs> {
        Self::open_with_env(url, &|k| std::env::var(k).ok())
    }

    /// `open` with the environment `env` reads.
    pub fn open_with_env(url: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<ObjectBlobs> {
        let shown = shown(url);
        let bad = |m: &str| Error::Io(format!("object store {shown}: {m}"));
        let (store, probe_store, prefix): (Arc<dyn ObjectStore>, Arc<dyn ObjectStore>, String) =
            if url.starts_with("s3://") {
                let u = S3Url::parse(url).map_err(|m| bad(&m))?;
                let mut client = object_store::ClientOptions::new();
                let mut b = object_store::aws::AmazonS3Builder::new()
                    .with_bucket_name(&u.bucket)
                    .with_region(u.region.as_deref().unwrap_or("us-east-1"));
                if let Some(e) = &u.endpoint {
                    client = client.with_allow_http(e.starts_with("http://"));
                    b = b.with_endpoint(e).with_virtual_hosted_style_request(false);
                }
                let ca = u
                    .cacert
                    .clone()
                    .or_else(|| env("AWS_CA_BUNDLE").filter(|v| !v.is_empty()));
                if let Some(ca) = ca {
                    let pem = std::fs::read(&ca).map_err(|e| bad(&format!("cacert {ca}: {e}")))?;
                    let certs = object_store::Certificate::from_pem_bundle(&pem)
                        .map_err(|e| bad(&format!("cacert {ca}: {e}")))?;
                    if certs.is_empty() {
                        return Err(bad(&format!("cacert {ca}: no PEM certificate in it")));
                    }
                    for c in certs {
                        client = client.with_root_certificate(c);
                    }
                }
                match credentials(&u, env).map_err(|m| bad(&m))? {
                    Some(c) => {
                        b = b
                            .with_access_key_id(c.key_id)
                            .with_secret_access_key(c.secret);
                        if let Some(t) = c.token {
                            b = b.with_token(t);
                        }
                    }
                    None => b = b.with_skip_signature(true),
                }
                let b = b.with_client_options(client);
                let probe = b
                    .clone()
                    .with_retry(object_store::RetryConfig {
                        max_retries: 0,
                        retry_timeout: std::time::Duration::from_secs(10),
                        ..Default::default()
                    })
                    .build()
                    .map_err(|e| bad(&one_line(&e)))?;
                let s = b.build().map_err(|e| bad(&one_line(&e)))?;
                (Arc::new(s), Arc::new(probe), u.prefix)
            } else if let Some(dir) = url.strip_prefix("file://") {
                if !dir.starts_with('/') {
                    return Err(bad("a file URL takes an absolute path (file:///DIR)"));
                }
                std::fs::create_dir_all(dir).map_err(|e| bad(&e.to_string()))?;
                // Synced: an object must be on disk, under its name, before the
                // commit that names it (docs/design.md, "Crash argument"); the
                // crate's default writes and renames without a sync.
                let s = Arc::new(
                    object_store::local::LocalFileSystem::new_with_prefix(dir)
                        .map_err(|e| bad(&e.to_string()))?
                        .with_fsync(true),
                );
                (s.clone(), s, String::new())
            } else {
                return Err(bad(&format!("expected {S3_USAGE} or file:///DIR")));
            };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("shoal-objects")
            .enable_all()
            .build()
            .map_err(|e| Error::Io(format!("object store runtime: {e}")))?;
        Ok(ObjectBlobs {
            store,
            probe_store,
            prefix,
            rt,
            url: shown,
            local: url.strip_prefix("file://").map(std::path::PathBuf::from),
        })
    }

    fn path(&self, name: &str) -> Path {
        if self.prefix.is_empty() {
            Path::from(name)
        } else {
            Path::from(format!("{}/{name}", self.prefix))
        }
    }

    /// Where this filesystem's objects are listed from: the URL's prefix,
    /// or the bucket's root.
    fn root(&self) -> Option<Path> {
        (!self.prefix.is_empty()).then(|| Path::from(self.prefix.as_str()))
    }

    /// Check that the store answers (a list of at most one object): mkfs
    /// and mount fail early, with the URL, when it does not.
    pub fn probe(&self) -> Result<()> {
        use futures::StreamExt;
        let mut s = self.probe_store.list(self.root().as_ref());
        match self.rt.block_on(s.next()) {
            None | Some(Ok(_)) => Ok(()),
            Some(Err(e)) => {
                let m = one_line(&e);
                let hint = if m.contains("NoSuchBucket") || m.contains("404") {
                    " (does the bucket exist? SeaweedFS: scripts/seaweed.sh makes one)"
                } else if m.contains("error sending request") || m.contains("onnect") {
                    " (is an S3 server answering at the endpoint?)"
                } else {
                    ""
                };
                Err(Error::Io(format!("object store {}: {m}{hint}", self.url)))
            }
        }
    }
}

fn err(e: object_store::Error) -> Error {
    match e {
        object_store::Error::NotFound { .. } => Error::NotFound,
        e => Error::Io(format!("object store: {}", one_line(&e))),
    }
}

impl Blobs for ObjectBlobs {
    fn put(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let p = self.path(name);
        let payload = PutPayload::from(bytes::Bytes::copy_from_slice(bytes));
        self.rt
            .block_on(self.store.put(&p, payload))
            .map(|_| ())
            .map_err(err)
    }
    fn get(&self, name: &str, off: u64, len: u64) -> Result<Vec<u8>> {
        if len == 0 {
            return Ok(vec![]);
        }
        let p = self.path(name);
        self.rt
            .block_on(self.store.get_range(&p, off..off + len))
            .map(|b| b.to_vec())
            .map_err(err)
    }
    fn delete(&self, name: &str) -> Result<()> {
        match self.rt.block_on(self.store.delete(&self.path(name))) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(err(e)),
        }
    }
    fn list(&self) -> Result<Vec<(String, u64)>> {
        use futures::TryStreamExt;
        let metas: Vec<object_store::ObjectMeta> = self
            .rt
            .block_on(self.store.list(self.root().as_ref()).try_collect())
            .map_err(err)?;
        let skip = if self.prefix.is_empty() {
            0
        } else {
            self.prefix.len() + 1
        };
        Ok(metas
            .into_iter()
            .map(|m| (m.location.as_ref()[skip..].to_string(), m.size))
            .collect())
    }
    /// A directory's: its filesystem's size and the room left to
    /// unprivileged writers (statvfs). S3: None (it has no such call).
    fn space(&self) -> Option<(u64, u64)> {
        use std::os::unix::ffi::OsStrExt;
        let dir = std::ffi::CString::new(self.local.as_ref()?.as_os_str().as_bytes()).ok()?;
        // SAFETY: `dir` is a NUL-terminated path and `s` a statvfs the
        // call fills; nothing is kept past it.
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(dir.as_ptr(), &mut s) } != 0 {
            return None;
        }
        let f = s.f_frsize as u64;
        Some((s.f_blocks as u64 * f, s.f_bavail as u64 * f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn an_s3_url_is_parsed_and_secrets_in_it_refused() {
        let u = S3Url::parse("s3://b/p/q/?endpoint=https://h:1&cacert=/ca.pem&credentials-file=/c&profile=x&region=r").unwrap();
        assert_eq!(
            u,
            S3Url {
                bucket: "b".into(),
                prefix: "p/q".into(),
                endpoint: Some("https://h:1".into()),
                region: Some("r".into()),
                cacert: Some("/ca.pem".into()),
                credentials_file: Some("/c".into()),
                profile: Some("x".into()),
                anonymous: false,
            }
        );
        assert!(S3Url::parse("s3://b?anonymous=1").unwrap().anonymous);
        for bad in [
            "s3://KEY:sekrit@b/p",
            "s3://b?secret_key=x",
            "s3://b?access_key_id=x",
            "s3://b?anonymous=1&profile=x",
            "s3://b?endpoint=",
            "s3://b?endpoint=ftp://h",
            "s3://b?cacert=",
            "s3://b?what=1",
            "s3://?endpoint=http://h:1",
        ] {
            let e = S3Url::parse(bad).unwrap_err();
            assert!(!e.contains("sekrit"), "{bad}: {e}");
        }
    }

    #[test]
    fn credentials_come_from_the_environment_then_the_shared_file_and_never_silently_none() {
        let d = std::env::temp_dir().join(format!("shoal-creds-{}", std::process::id()));
        std::fs::create_dir_all(d.join(".aws")).unwrap();
        let home = d.to_str().unwrap();
        std::fs::write(
            d.join(".aws/credentials"),
            "# keys\n[default]\naws_access_key_id = AK1\naws_secret_access_key = S1\n\n[other]\naws_access_key_id=AK2\naws_secret_access_key=S2\naws_session_token=T2\n",
        )
        .unwrap();
        let u = S3Url::parse("s3://b").unwrap();
        let c = |u: &S3Url, vars: &[(&str, &str)]| credentials(u, &env(vars));
        // The environment first.
        let got = c(
            &u,
            &[
                ("AWS_ACCESS_KEY_ID", "E"),
                ("AWS_SECRET_ACCESS_KEY", "ES"),
                ("HOME", home),
            ],
        )
        .unwrap()
        .unwrap();
        assert_eq!((got.key_id.as_str(), got.secret.as_str()), ("E", "ES"));
        assert!(
            c(&u, &[("AWS_ACCESS_KEY_ID", "E")]).is_err(),
            "half a key pair"
        );
        // ~/.aws/credentials, its default profile, or AWS_PROFILE's.
        assert_eq!(c(&u, &[("HOME", home)]).unwrap().unwrap().key_id, "AK1");
        let o = c(&u, &[("HOME", home), ("AWS_PROFILE", "other")])
            .unwrap()
            .unwrap();
        assert_eq!((o.key_id.as_str(), o.token.as_deref()), ("AK2", Some("T2")));
        let f = format!("{home}/.aws/credentials");
        let named = S3Url::parse(&format!("s3://b?credentials-file={f}&profile=other")).unwrap();
        assert_eq!(c(&named, &[]).unwrap().unwrap().key_id, "AK2");
        assert_eq!(
            c(&u, &[("AWS_SHARED_CREDENTIALS_FILE", &f)])
                .unwrap()
                .unwrap()
                .key_id,
            "AK1"
        );
        // A profile or a named file that is not there is said.
        let e = c(&u, &[("HOME", home), ("AWS_PROFILE", "nope")]).unwrap_err();
        assert!(e.contains("[nope]"), "{e}");
        let e = c(
            &S3Url::parse("s3://b?credentials-file=/no/such").unwrap(),
            &[],
        )
        .unwrap_err();
        assert!(e.contains("/no/such"), "{e}");
        // Nothing anywhere: refused, saying the ways; unsigned only when asked.
        let e = c(&u, &[("HOME", "/nonexistent")]).unwrap_err();
        assert!(
            e.contains("anonymous=1") && e.contains("AWS_ACCESS_KEY_ID"),
            "{e}"
        );
        assert_eq!(
            c(
                &S3Url::parse("s3://b?anonymous=1").unwrap(),
                &[("HOME", home)]
            )
            .unwrap(),
            None
        );
        assert!(!format!("{:?}", o).contains("S2"), "Debug shows no secret");
        assert_eq!(
            shown("s3://K:sek@b/p?endpoint=http://h&secret_key=x"),
            "s3://***@b/p?endpoint=http://h&secret_key=***"
        );
        let e = ObjectBlobs::open_with_env("s3://K:sek@b/p", &|_| None)
            .err()
            .unwrap()
            .to_string();
        assert!(!e.contains("sek"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn opening_without_credentials_is_refused_in_one_line() {
        let e = ObjectBlobs::open_with_env("s3://b/p?endpoint=http://127.0.0.1:1", &|_| None)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("no credentials") && !e.contains('\n'), "{e}");
        assert!(ObjectBlobs::open_with_env(
            "s3://b/p?endpoint=http://127.0.0.1:1&anonymous=1",
            &|_| None
        )
        .is_ok());
        let e = ObjectBlobs::open_with_env(
            "s3://b/p?endpoint=https://127.0.0.1:1&anonymous=1&cacert=/no/ca.pem",
            &|_| None,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("cacert /no/ca.pem"), "{e}");
    }
}
