//! The file tools' read-only view of the session's media: `media/<file>` names a file its chat
//! sent (saved under `$HERMESD_HOME/media/<platform>/<chat>/`), the path the model is given for
//! an attachment. Only `read_file` consults it, and only when the file exists there; everything
//! else (and every write) stays beneath the workdir. The view is opened as its own `Workdir`
//! handle, so `..`, absolute paths and symlinks never lead to another chat's files.

use std::path::{Component, Path, PathBuf};

use hermesd_platform::media::sanitise;

use super::{Target, is_secret_path, normalise};
use crate::agent::tools::ToolContext;
use crate::sandbox::Workdir;

/// The first component of a path in the view.
const VIEW: &str = "media";

/// The folder this turn's chat saves its files in.
pub(super) fn chat_media_dir(ctx: &ToolContext) -> PathBuf {
    ctx.data_dir.join(VIEW).join(sanitise(&ctx.chat.platform)).join(sanitise(&ctx.chat.chat_id))
}

/// When `raw` (relative, `media/...`) names something in the chat's media folder: that folder
/// opened as a handle, and the target inside it. `None` sends the path to the workdir as usual.
pub(super) fn in_view(folder: &Path, raw: &str) -> Option<(Workdir, Target)> {
    let raw = Path::new(raw.trim());
    if raw.is_absolute() || raw.components().any(|c| c == Component::ParentDir) {
        return None;
    }
    let path = normalise(raw);
    let rest = path.strip_prefix(VIEW).ok().filter(|r| !r.as_os_str().is_empty())?.to_path_buf();
    let view = Workdir::open(folder).ok()?;
    // Existence through the handle: a symlink is not followed, so one pointing out is found here
    // and then refused when opened beneath the view.
    view.dir().symlink_metadata(&rest).ok()?;
    let shown = Path::new(VIEW).join(&rest).display().to_string();
    Some((view, Target { secret: is_secret_path(&rest), rel: rest, shown }))
}
