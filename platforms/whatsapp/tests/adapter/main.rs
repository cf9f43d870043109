//! The WhatsApp adapter against the fake Graph API (shared with the daemon's tests): the
//! conformance kit, webhooks handed straight to `handle_webhook`, media, buttons, statuses and
//! the 24-hour window.

#[path = "../../../../tests/support/fake_whatsapp/mod.rs"]
#[allow(dead_code, unreachable_pub)]
mod fake_whatsapp;

mod conformance;
mod webhook;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use fake_whatsapp::{FakeWhatsApp, PHONE_NUMBER_ID};
use hermesd_platform::conformance::RecordingIngress;
use hermesd_platform::{PlatformContext, WebhookRequest};
use hermesd_whatsapp::{WhatsAppPlatform, WhatsAppSettings, sign};
use serde_json::Value;

const TOKEN: &str = "EAAtest-access-token";
const SECRET: &str = "test-app-secret";
const VERIFY: &str = "test-verify-token";
const USER: &str = "16505551234";

fn settings(fake: &FakeWhatsApp, dir: &Path) -> WhatsAppSettings {
    let _ = rustls::crypto::ring::default_provider().install_default();
    WhatsAppSettings {
        access_token: TOKEN.into(),
        app_secret: SECRET.into(),
        verify_token: VERIFY.into(),
        phone_number_id: PHONE_NUMBER_ID.into(),
        api_url: fake.api_url(),
        media_dir: dir.join("media").join("whatsapp"),
        api_timeout: Duration::from_secs(5),
        ..WhatsAppSettings::default()
    }
}

struct Rig {
    fake: FakeWhatsApp,
    platform: Arc<WhatsAppPlatform>,
    ingress: Arc<RecordingIngress>,
    ctx: PlatformContext,
    _dir: tempfile::TempDir,
    dir: std::path::PathBuf,
}

async fn rig_with(adjust: impl FnOnce(&mut WhatsAppSettings)) -> Rig {
    let fake = FakeWhatsApp::start(TOKEN).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut settings = settings(&fake, dir.path());
    adjust(&mut settings);
    let platform = Arc::new(WhatsAppPlatform::new(settings));
    let ingress = RecordingIngress::new();
    let ctx = PlatformContext { ingress: ingress.clone() };
    Rig { fake, platform, ingress, ctx, dir: dir.path().to_path_buf(), _dir: dir }
}

async fn rig() -> Rig {
    rig_with(|_| {}).await
}

fn signed(body: &Value) -> WebhookRequest {
    let body = body.to_string().into_bytes();
    WebhookRequest { headers: vec![("x-hub-signature-256".into(), sign(SECRET, &body))], body }
}

impl Rig {
    /// Hands `notification` to the adapter as Meta would post it; the HTTP status.
    async fn post(&self, notification: &Value) -> u16 {
        use hermesd_platform::Platform;
        self.platform.handle_webhook(&self.ctx, signed(notification)).await.status
    }
}
