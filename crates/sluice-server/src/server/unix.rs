//! Unix socket files: binding one safely (a stale file is replaced, a live daemon or a file
//! that is not a socket is refused) and removing it on stop only if it is still the one this
//! daemon created. A socket handed over by the service manager is never removed.

use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tokio::net::UnixListener;

/// A listening Unix socket, and what identifies its file as ours when it is time to remove it.
#[derive(Debug)]
pub struct BoundUnix {
    pub listener: UnixListener,
    pub path: PathBuf,
    /// The inode of the file this daemon created; `None` for a socket it was handed.
    created: Option<u64>,
}

impl BoundUnix {
    /// A socket this daemon did not create (socket activation): its file stays on stop.
    pub fn inherited(listener: UnixListener) -> BoundUnix {
        let path = listener
            .local_addr()
            .ok()
            .and_then(|addr| addr.as_pathname().map(Path::to_owned))
            .unwrap_or_default();
        BoundUnix {
            listener,
            path,
            created: None,
        }
    }

    /// The file to remove on stop, with its inode, if this daemon created it.
    pub(crate) fn created_file(&self) -> Option<(PathBuf, u64)> {
        self.created.map(|inode| (self.path.clone(), inode))
    }
}

/// Binds the Unix socket at `path` with file mode `mode`. A stale socket file (nobody
/// listening) is replaced; a live daemon on it, or a file that is not a socket, is an error.
pub fn bind_unix(path: &Path, mode: u32) -> io::Result<BoundUnix> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => {
            if !meta.file_type().is_socket() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!(
                        "{} exists and is not a socket; not replacing it",
                        path.display()
                    ),
                ));
            }
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("a daemon is already listening on {}", path.display()),
                ));
            }
            std::fs::remove_file(path)?;
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => return Err(err),
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    let inode = std::fs::metadata(path)?.ino();
    Ok(BoundUnix {
        listener,
        path: path.to_owned(),
        created: Some(inode),
    })
}

/// Removes the socket file unless another daemon has replaced it since.
pub(crate) fn remove_socket(path: &Path, inode: u64) {
    if std::fs::metadata(path).is_ok_and(|meta| meta.ino() == inode)
        && let Err(err) = std::fs::remove_file(path)
    {
        tracing::warn!(path = %path.display(), error = %err, "could not remove the socket");
    }
}
