//! Debian's nginx in front of several `tether serve` instances, configured by the very file
//! docs/deploy.md gives (`deploy/nginx/tether.conf`): its upstream gets the test's instances,
//! its `listen` lines free loopback ports, and its certificate lines are left out (TLS is not
//! what these tests are about). Its own prefix directory, its own ports; stopped when dropped.

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long nginx may take to accept connections.
const READY_WITHIN: Duration = Duration::from_secs(10);

/// A running nginx.
pub struct Nginx {
    /// `127.0.0.1:PORT` of the HTTPS server block (served as plain HTTP here).
    pub addr: String,
    /// `127.0.0.1:PORT` of the block that redirects plain HTTP to HTTPS.
    pub redirect_addr: String,
    dir: PathBuf,
    child: Option<Child>,
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// The deployment's configuration with the test's instances and ports: every `server` line of
/// the upstream replaced by `backends`, `listen 443…` → `main`, `listen 80…` → `redirect`, the
/// IPv6 `listen` and the `ssl_*` lines left out. Panics when the file no longer has the lines
/// this relies on, so that the test and the documented file cannot drift apart silently.
pub fn site_config(deployed: &str, backends: &[String], main: u16, redirect: u16) -> String {
    let mut out = String::new();
    let mut in_upstream = false;
    let (mut upstreams, mut mains, mut redirects) = (0, 0, 0);
    for line in deployed.lines() {
        let code = line.trim();
        if code.starts_with("upstream tether") {
            in_upstream = true;
        } else if in_upstream && code == "}" {
            in_upstream = false;
        }
        if in_upstream && code.starts_with("server ") {
            if upstreams == 0 {
                for backend in backends {
                    out.push_str(&format!("    server {backend} max_fails=1 fail_timeout=2s;\n"));
                }
            }
            upstreams += 1;
            continue;
        }
        if code.starts_with("listen [::]") || code.starts_with("ssl_") {
            continue;
        }
        if code.starts_with("listen 443") {
            mains += 1;
            out.push_str(&format!("    listen 127.0.0.1:{main};\n"));
        } else if code.starts_with("listen 80") {
            redirects += 1;
            out.push_str(&format!("    listen 127.0.0.1:{redirect};\n"));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert!(upstreams > 0 && mains == 1 && redirects == 1, "deploy/nginx/tether.conf changed its shape:\n{deployed}");
    out
}

/// Where the deployment's file is.
pub fn deployed_config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/nginx/tether.conf")
}

impl Nginx {
    /// Starts nginx in front of `backends` (`127.0.0.1:PORT` each).
    pub fn start(name: &str, backends: &[String]) -> Nginx {
        let dir = std::env::temp_dir().join(format!("tether-nginx-prefix-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("temp")).unwrap();
        let (main, redirect) = (free_port(), free_port());
        let deployed = std::fs::read_to_string(deployed_config()).expect("deploy/nginx/tether.conf");
        std::fs::write(dir.join("tether.conf"), site_config(&deployed, backends, main, redirect)).unwrap();
        // As root, nginx's workers would switch to `nobody`, who cannot write the temp paths.
        let root = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap()) == 0;
        let temp = dir.join("temp");
        let temp = temp.display();
        let main_conf = format!(
            "{user}daemon off;\nmaster_process on;\nworker_processes 1;\npid {dir}/nginx.pid;\nerror_log stderr warn;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {temp}/body;\n  proxy_temp_path {temp}/proxy;\n  \
             fastcgi_temp_path {temp}/fastcgi;\n  uwsgi_temp_path {temp}/uwsgi;\n  scgi_temp_path {temp}/scgi;\n  \
             include {dir}/tether.conf;\n}}\n",
            user = if root { "user root;\n" } else { "" },
            dir = dir.display(),
        );
        std::fs::write(dir.join("nginx.conf"), main_conf).unwrap();
        let nginx = which_nginx();
        let check = Command::new(&nginx).arg("-t").arg("-p").arg(&dir).arg("-c").arg(dir.join("nginx.conf")).output();
        let check = check.expect("nginx runs (`cargo xtask setup` installs Debian's nginx)");
        assert!(check.status.success(), "nginx -t: {}", String::from_utf8_lossy(&check.stderr));
        let child = Command::new(&nginx)
            .arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .stdout(Stdio::null())
            // Its log (connections refused by killed instances…) as the servers' own: on request.
            .stderr(if std::env::var_os("TETHER_TEST_LOGS").is_some() { Stdio::inherit() } else { Stdio::null() })
            .spawn()
            .expect("start nginx");
        let nginx = Nginx {
            addr: format!("127.0.0.1:{main}"),
            redirect_addr: format!("127.0.0.1:{redirect}"),
            dir,
            child: Some(child),
        };
        let started = Instant::now();
        while std::net::TcpStream::connect(&nginx.addr).is_err() {
            assert!(started.elapsed() < READY_WITHIN, "nginx does not accept connections after {READY_WITHIN:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
        nginx
    }

    /// The WebSocket URL through nginx.
    pub fn url(&self) -> String {
        format!("ws://{}/ws", self.addr)
    }
}

/// nginx is in /usr/sbin, which a non-root PATH may not have.
fn which_nginx() -> PathBuf {
    let sbin = Path::new("/usr/sbin/nginx");
    if sbin.exists() { sbin.to_path_buf() } else { PathBuf::from("nginx") }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGTERM: the master stops its workers and exits (SIGKILL would leave the workers).
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
