//! Test-only certificates, made at test time with the `openssl` command
//! into a temporary directory that is removed when they are dropped: a CA,
//! a server certificate it signed for `127.0.0.1` and `localhost`, and a
//! client certificate it signed. Nothing here is ever committed.
//!
//! `openssl` must be installed (`scripts/test` installs it): if it is
//! missing, making certificates panics with a message that says so.
// Each test file uses its own subset of these helpers.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// A CA and the certificates it signed, as PEM files in a directory of
/// their own.
#[derive(Debug)]
pub struct Certs {
    dir: PathBuf,
}

impl Certs {
    /// Makes a new CA (named `name`), a server certificate and a client
    /// certificate signed by it. EC P-256 keys (PKCS#8), valid for two days.
    pub fn generate(name: &str) -> Certs {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "fusebox-test-certs-{}-{}-{name}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create the certificates' directory");
        let certs = Certs { dir };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        certs.openssl(&[
            &["req", "-x509", "-new"],
            &ec[..],
            &["-keyout", "ca.key", "-out", "ca.crt", "-days", "2"],
            &["-subj", &format!("/CN=fusebox test CA {name}")],
            &["-addext", "basicConstraints=critical,CA:TRUE"],
            &["-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        ]);
        certs.sign(
            "server",
            "serverAuth",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
            2,
        );
        certs.sign("client", "clientAuth", "", 3);
        certs
    }

    /// A key and CSR for `who`, signed by the CA with extended key usage
    /// `usage` and the extra extension lines `ext`.
    fn sign(&self, who: &str, usage: &str, ext: &str, serial: u32) {
        let (key, csr, crt, extfile) = (
            format!("{who}.key"),
            format!("{who}.csr"),
            format!("{who}.crt"),
            format!("{who}.ext"),
        );
        fs::write(
            self.dir.join(&extfile),
            format!("basicConstraints=CA:FALSE\nextendedKeyUsage={usage}\n{ext}"),
        )
        .expect("write the extensions file");
        self.openssl(&[
            &["req", "-new", "-newkey", "ec"],
            &["-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"],
            &[
                "-keyout",
                &key,
                "-out",
                &csr,
                "-subj",
                &format!("/CN=fusebox test {who}"),
            ],
        ]);
        self.openssl(&[
            &[
                "x509", "-req", "-in", &csr, "-CA", "ca.crt", "-CAkey", "ca.key",
            ],
            &["-set_serial", &serial.to_string(), "-days", "2"],
            &["-out", &crt, "-extfile", &extfile],
        ]);
    }

    fn openssl(&self, args: &[&[&str]]) {
        let args: Vec<&str> = args.concat();
        let out = Command::new("openssl")
            .args(&args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run openssl ({e}): the TLS tests make their certificates with it; \
                     scripts/test installs it (apt-get install -y openssl)"
                )
            });
        assert!(
            out.status.success(),
            "openssl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    pub fn read(&self, file: &str) -> Vec<u8> {
        fs::read(self.path(file)).expect("read a certificate file")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}
