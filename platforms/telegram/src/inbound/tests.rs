//! Table tests for normalisation: raw Bot API update JSON in, expected event out.

use hermesd_platform::conformance::check_normalise_table;
use hermesd_platform::{
    AttachmentKind, ChatRef, ChatType, InboundAction, InboundEvent, InboundMessage, ReplyContext, Sender,
};
use serde_json::{Value, json};
use teloxide::types::Update;

use super::*;

const BOT_ID: u64 = 999;
const DATE: i64 = 1_700_000_000;

fn bot() -> BotIdentity {
    BotIdentity { id: BOT_ID, username: "hermes_bot".into() }
}

fn user(id: u64, name: &str) -> Value {
    json!({"id": id, "is_bot": false, "first_name": name, "username": name.to_lowercase()})
}

fn bot_user() -> Value {
    json!({"id": BOT_ID, "is_bot": true, "first_name": "Hermes", "username": "hermes_bot"})
}

fn private() -> Value {
    json!({"id": 42, "type": "private", "first_name": "Ann", "username": "ann"})
}

fn group() -> Value {
    json!({"id": -100, "type": "group", "title": "Friends"})
}

fn forum() -> Value {
    json!({"id": -1001, "type": "supergroup", "title": "Forum", "is_forum": true})
}

fn channel() -> Value {
    json!({"id": -1002, "type": "channel", "title": "News"})
}

fn message(id: i64, chat: Value, from: Option<Value>, text: &str) -> Value {
    let mut message = json!({"message_id": id, "date": DATE, "chat": chat, "text": text});
    if let Some(from) = from {
        message["from"] = from;
    }
    message
}

fn update(id: u32, kind: &str, body: Value) -> Value {
    json!({"update_id": id, kind: body})
}

fn text_event(event_id: &str, chat: ChatRef, sender: (&str, &str), text: &str, addressed: bool) -> InboundEvent {
    let message_id = event_id.split(':').nth(1).unwrap_or_default().to_owned();
    // The titles of the chats above: groups, forums and channels have one, DMs none.
    let chat_title = match chat.chat_id.as_str() {
        "-100" => Some("Friends".to_owned()),
        "-1001" => Some("Forum".to_owned()),
        "-1002" => Some("News".to_owned()),
        _ => None,
    };
    InboundEvent::Message {
        event_id: event_id.into(),
        message: InboundMessage {
            profile: None,
            message_id,
            chat,
            sender: Sender { id: sender.0.into(), name: Some(sender.1.into()), is_bot: false, roles: Vec::new() },
            text: text.into(),
            attachments: Vec::new(),
            reply_to: None,
            addressed,
            timestamp_ms: DATE * 1000,
            history: Vec::new(),
            chat_title,
            client: None,
        },
    }
}

fn with_reply(mut event: InboundEvent, reply: ReplyContext) -> InboundEvent {
    if let InboundEvent::Message { message, .. } = &mut event {
        message.reply_to = Some(reply);
    }
    event
}

fn chat(id: &str, chat_type: ChatType) -> ChatRef {
    ChatRef::new("telegram", id, chat_type)
}

fn rules() -> Rules {
    Rules { mention_patterns: vec!["hermes".into()], ..Rules::default() }
}

fn gated() -> Rules {
    Rules { require_mention: true, ..rules() }
}

/// Gated without the `hermes` pattern, which would match the bot's own name.
fn strict() -> Rules {
    Rules { require_mention: true, ..Rules::default() }
}

/// Parses from text, as the adapter does: teloxide's `Update` cannot be read from a `Value`.
fn parse(raw: &Value) -> Update {
    serde_json::from_str(&raw.to_string()).expect("test update parses")
}

fn run_normalise(raw: &(Rules, Value)) -> Option<InboundEvent> {
    normalise(&parse(&raw.1), &bot(), &raw.0).map(|normalised| normalised.event)
}

#[test]
fn messages_normalise_per_chat_kind() {
    let ann = ("42", "Ann (@ann)");
    let bob = ("7", "Bob (@bob)");
    let mut reply_to_bot = message(21, group(), Some(user(7, "Bob")), "and then?");
    reply_to_bot["reply_to_message"] = message(20, group(), Some(bot_user()), "Once upon a time");
    let mut topic = message(31, forum(), Some(user(7, "Bob")), "in the topic");
    topic["message_thread_id"] = json!(5);
    topic["is_topic_message"] = json!(true);
    topic["reply_to_message"] = json!({"message_id": 5, "date": DATE, "chat": forum(),
        "forum_topic_created": {"name": "Ops", "icon_color": 7322096}});
    let mut in_thread = chat("-1001", ChatType::Thread);
    in_thread.thread_id = Some("5".into());
    let mut post = message(40, channel(), None, "breaking");
    post["sender_chat"] = channel();
    let channel_event = InboundEvent::Message {
        event_id: "-1002:40".into(),
        message: InboundMessage {
            sender: Sender { id: "-1002".into(), name: Some("News".into()), is_bot: false, roles: Vec::new() },
            ..message_of(text_event("-1002:40", chat("-1002", ChatType::Channel), ann, "breaking", true))
        },
    };
    let mut edited = message(12, private(), Some(user(42, "Ann")), "hello again");
    edited["edit_date"] = json!(DATE + 60);
    let handle_all = Rules { channel_posts: true, edited_messages: true, ..rules() };
    let mut bot_photo = message(50, group(), Some(bot_user()), "");
    bot_photo["text"] = Value::Null;
    let sticker = json!({"message_id": 51, "date": DATE, "chat": private(), "from": user(42, "Ann"),
        "sticker": {"file_id": "s", "file_unique_id": "su", "type": "regular", "width": 512, "height": 512,
        "is_animated": false, "is_video": false}});

    let rows = [
        (
            "private text",
            (rules(), update(1, "message", message(10, private(), Some(user(42, "Ann")), "hello"))),
            Some(text_event("42:10", chat("42", ChatType::Dm), ann, "hello", true)),
        ),
        (
            "group unaddressed",
            (rules(), update(2, "message", message(11, group(), Some(user(7, "Bob")), "lunch?"))),
            Some(text_event("-100:11", chat("-100", ChatType::Group), bob, "lunch?", false)),
        ),
        (
            "group unaddressed with require_mention",
            (gated(), update(3, "message", message(11, group(), Some(user(7, "Bob")), "lunch?"))),
            None,
        ),
        (
            "group @mention",
            (gated(), update(4, "message", message(12, group(), Some(user(7, "Bob")), "@Hermes_Bot hi"))),
            Some(text_event("-100:12", chat("-100", ChatType::Group), bob, "@Hermes_Bot hi", true)),
        ),
        (
            "mention of a longer name does not count",
            (strict(), update(5, "message", message(13, group(), Some(user(7, "Bob")), "@hermes_bot2 hi"))),
            None,
        ),
        (
            "mention pattern",
            (gated(), update(6, "message", message(14, group(), Some(user(7, "Bob")), "Hey HERMES, hi"))),
            Some(text_event("-100:14", chat("-100", ChatType::Group), bob, "Hey HERMES, hi", true)),
        ),
        (
            "/status@botname",
            (gated(), update(7, "message", message(15, group(), Some(user(7, "Bob")), "/status@hermes_bot now"))),
            Some(text_event("-100:15", chat("-100", ChatType::Group), bob, "/status now", true)),
        ),
        (
            "bare /command",
            (gated(), update(8, "message", message(16, group(), Some(user(7, "Bob")), "/new"))),
            Some(text_event("-100:16", chat("-100", ChatType::Group), bob, "/new", true)),
        ),
        (
            "command for another bot",
            (strict(), update(9, "message", message(17, group(), Some(user(7, "Bob")), "/start@other_bot"))),
            None,
        ),
        (
            "a path is not a command",
            (strict(), update(20, "message", message(22, group(), Some(user(7, "Bob")), "/tmp/x is full"))),
            None,
        ),
        (
            "reply to the bot",
            (gated(), update(10, "message", reply_to_bot)),
            Some(with_reply(
                text_event("-100:21", chat("-100", ChatType::Group), bob, "and then?", true),
                ReplyContext {
                    message_id: "20".into(),
                    text: Some("Once upon a time".into()),
                    from_bot: true,
                    author: Some("Hermes (@hermes_bot)".into()),
                },
            )),
        ),
        (
            "forum topic",
            (rules(), update(11, "message", topic)),
            Some(text_event("-1001:31", in_thread, bob, "in the topic", false)),
        ),
        ("channel post ignored", (rules(), update(12, "channel_post", post.clone())), None),
        ("channel post handled", (handle_all.clone(), update(13, "channel_post", post)), Some(channel_event)),
        (
            "bot sender ignored",
            (rules(), update(14, "message", message(18, group(), Some(bot_user()), "I said"))),
            None,
        ),
        (
            "other bots ignored",
            (
                rules(),
                update(
                    15,
                    "message",
                    message(
                        19,
                        private(),
                        Some(json!({"id": 5, "is_bot": true,
                "first_name": "Spam"})),
                        "buy",
                    ),
                ),
            ),
            None,
        ),
        ("edited message ignored", (rules(), update(16, "edited_message", edited.clone())), None),
        (
            "edited message handled",
            (handle_all, update(17, "edited_message", edited)),
            Some(text_event("42:12:e1700000060", chat("42", ChatType::Dm), ann, "hello again", true)),
        ),
        ("message without text or files", (rules(), update(18, "message", sticker)), None),
        ("bot's own media ignored", (rules(), update(19, "message", bot_photo)), None),
    ];
    check_normalise_table(&rows, run_normalise);
}

fn message_of(event: InboundEvent) -> InboundMessage {
    match event {
        InboundEvent::Message { message, .. } => message,
        InboundEvent::Action { .. } => unreachable!("built as a message"),
    }
}

#[test]
fn callback_queries_become_actions() {
    let query = json!({"id": "cbq1", "from": user(42, "Ann"), "chat_instance": "ci", "data": "approve:7",
        "message": message(55, private(), Some(bot_user()), "Run `rm -rf /tmp/x`?")});
    let from_bot = json!({"id": "cbq2", "from": bot_user(), "chat_instance": "ci", "data": "x",
        "message": message(55, private(), Some(bot_user()), "?")});
    let inline_only = json!({"id": "cbq3", "from": user(42, "Ann"), "chat_instance": "ci", "data": "x",
        "inline_message_id": "im"});
    let action = InboundAction {
        chat: chat("42", ChatType::Dm),
        sender: Sender { id: "42".into(), name: Some("Ann (@ann)".into()), is_bot: false, roles: Vec::new() },
        message_id: "55".into(),
        data: "approve:7".into(),
    };
    let rows = [
        (
            "button press",
            (rules(), update(30, "callback_query", query.clone())),
            Some(InboundEvent::Action { event_id: "cb:cbq1".into(), action }),
        ),
        ("press by a bot", (rules(), update(31, "callback_query", from_bot)), None),
        ("inline message without chat", (rules(), update(32, "callback_query", inline_only)), None),
    ];
    check_normalise_table(&rows, run_normalise);
    let parsed = parse(&update(30, "callback_query", query));
    let normalised = normalise(&parsed, &bot(), &rules()).expect("an action");
    assert_eq!(normalised.callback_id.as_deref(), Some("cbq1"), "the query must be answered");
}

#[test]
fn files_are_described_for_download() {
    let mut photo = message(60, private(), Some(user(42, "Ann")), "");
    photo["text"] = Value::Null;
    photo["caption"] = json!("look");
    photo["photo"] = json!([
        {"file_id": "small", "file_unique_id": "us", "width": 90, "height": 90, "file_size": 1000},
        {"file_id": "big", "file_unique_id": "ub", "width": 1280, "height": 960, "file_size": 90000},
    ]);
    let parsed = parse(&update(40, "message", photo));
    let normalised = normalise(&parsed, &bot(), &rules()).expect("a message");
    let text = match &normalised.event {
        InboundEvent::Message { message, .. } => message.text.clone(),
        InboundEvent::Action { .. } => String::new(),
    };
    assert_eq!(text, "look", "the caption is the text");
    let want = FileRequest {
        file_id: "big".into(),
        unique_id: "ub".into(),
        kind: AttachmentKind::Image,
        name: "photo.jpg".into(),
        mime: Some("image/jpeg".into()),
        size: Some(90000),
    };
    assert_eq!(normalised.files, vec![want]);

    let mut doc = message(61, private(), Some(user(42, "Ann")), "");
    doc["text"] = Value::Null;
    doc["document"] = json!({"file_id": "d", "file_unique_id": "ud", "file_name": "report.pdf",
        "mime_type": "application/pdf"});
    let parsed = parse(&update(41, "message", doc));
    let normalised = normalise(&parsed, &bot(), &rules()).expect("a file alone is a message");
    assert_eq!(normalised.files.len(), 1);
    assert_eq!(normalised.files[0].name, "report.pdf");
    assert_eq!(normalised.files[0].mime.as_deref(), Some("application/pdf"));
    assert_eq!(normalised.files[0].size, None, "an unknown size stays unknown");
}

#[test]
fn commands_lose_only_this_bots_name() {
    let table = [
        ("/status@hermes_bot now", "/status now"),
        ("/status@Hermes_Bot", "/status"),
        ("/status@other_bot", "/status@other_bot"),
        ("/status", "/status"),
        ("hi @hermes_bot", "hi @hermes_bot"),
    ];
    for (input, want) in table {
        assert_eq!(strip_command_mention(input, "hermes_bot"), want, "{input}");
    }
}

fn album_part(id: i64, chat: Value, from: Value, caption: Option<&str>, file: &str) -> Value {
    let mut part = message(id, chat, Some(from), "");
    part["text"] = Value::Null;
    if let Some(caption) = caption {
        part["caption"] = json!(caption);
    }
    part["media_group_id"] = json!("album-1");
    part["photo"] = json!([{"file_id": file, "file_unique_id": format!("u{file}"), "width": 800, "height": 600}]);
    part
}

#[test]
fn an_album_is_one_message_with_every_part_and_the_caption() {
    // In a group with mention gating only the second part's caption mentions the bot.
    let parts = [
        parse(&update(70, "message", album_part(80, group(), user(7, "Bob"), None, "p1"))),
        parse(&update(71, "message", album_part(81, group(), user(7, "Bob"), Some("@hermes_bot compare these"), "p2"))),
        parse(&update(72, "message", album_part(82, group(), user(7, "Bob"), None, "p3"))),
    ];
    assert_eq!(album_key(&parts[0]).as_deref(), Some("-100:album-1"));
    assert_eq!(album_key(&parse(&update(73, "message", message(83, group(), Some(user(7, "Bob")), "hi")))), None);
    let mut gated = rules();
    gated.require_mention = true;
    assert!(normalise(&parts[0], &bot(), &gated).is_none(), "alone, an uncaptioned part is not addressed");
    let refs: Vec<&Update> = parts.iter().collect();
    let album = normalise_album(&refs, &bot(), &gated).expect("the album is addressed by its caption");
    let InboundEvent::Message { event_id, message } = &album.event else { panic!("a message") };
    assert_eq!(event_id, "-100:80", "the first part's id, stable across re-polls");
    assert_eq!(message.message_id, "80");
    assert_eq!(message.text, "@hermes_bot compare these");
    assert_eq!(album.files.iter().map(|f| f.file_id.as_str()).collect::<Vec<_>>(), ["p1", "p2", "p3"]);
}

#[test]
fn people_are_named_as_the_chat_shows_them_with_the_username_to_tell_them_apart() {
    let named = |user: Value| super::display_name(&serde_json::from_value(user).unwrap());
    let full = json!({"id": 1, "is_bot": false, "first_name": "Ann", "last_name": "Lee", "username": "annlee"});
    assert_eq!(named(full), "Ann Lee (@annlee)");
    assert_eq!(named(json!({"id": 2, "is_bot": false, "first_name": "Bob"})), "Bob");
    assert_eq!(named(json!({"id": 3, "is_bot": false, "first_name": " ", "username": "x"})), "@x");
}
