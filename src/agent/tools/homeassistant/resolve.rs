//! Which entities a service call would touch, and whether that needs a person's approval.
//!
//! A call's target (`entity_id`, `area_id`, `device_id`, the word `all`) is resolved through
//! HA's registries and states, groups expanded to their members, before the call is made; a
//! target that cannot be resolved (floors, labels) counts as sensitive, so a call never slips
//! past approval by naming its entities indirectly.
//!
//! Resolved: `entity_id` and `all` (lower-cased, as HA reads them), areas by id or name with their
//! devices' entities, devices, and group members; the tool moves target keys out of the service
//! data first (`TARGET_KEYS`), so what is resolved is what is sent. `Sensitivity::reason` asks for
//! approval when the call's domain is sensitive (configured, or always: `script`, `scene`,
//! `automation`, `shell_command`, `rest_command`, `hassio`, `backup`), when it is
//! `homeassistant.stop|restart` or `recorder.purge|purge_entities|disable`, when any entity it
//! touches is in a sensitive domain or listed as sensitive, when part of its target cannot be
//! resolved (floors, labels), or when it resolves to no entity and its domain is not in
//! `harmless_domains` (default deny).

use std::collections::{BTreeSet, HashMap};

use serde_json::{Map, Value};

/// Domains whose services can act on anything (or on Home Assistant itself): every call to them
/// needs approval.
pub const ALWAYS_SENSITIVE: [&str; 7] =
    ["script", "scene", "automation", "shell_command", "rest_command", "hassio", "backup"];
/// Services that stop, restart or erase Home Assistant's own state: always asked, whatever they
/// target.
pub const ALWAYS_SENSITIVE_SERVICES: [&str; 5] =
    ["homeassistant.stop", "homeassistant.restart", "recorder.purge", "recorder.purge_entities", "recorder.disable"];
/// Target keys HA accepts (in `target` or in the service data).
pub const TARGET_KEYS: [&str; 5] = ["entity_id", "area_id", "device_id", "floor_id", "label_id"];
/// How deep groups of groups are expanded.
const GROUP_DEPTH: usize = 3;

/// HA's registries and states, as far as resolution needs them.
#[derive(Debug, Default)]
pub struct HomeIndex {
    /// Entity id → (device id, area id) from the entity registry.
    pub entities: HashMap<String, (Option<String>, Option<String>)>,
    /// Device id → area id from the device registry.
    pub devices: HashMap<String, Option<String>>,
    /// Area id → name.
    pub areas: HashMap<String, String>,
    /// Entity id → its state object, from `get_states`.
    pub states: HashMap<String, Value>,
}

fn opt_str(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned)
}

impl HomeIndex {
    /// Build from the results of `get_states`, `config/entity_registry/list`,
    /// `config/device_registry/list` and `config/area_registry/list` (null where not asked).
    pub fn from_results(states: &Value, entities: &Value, devices: &Value, areas: &Value) -> Self {
        let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
        let mut index = HomeIndex::default();
        for state in list(states) {
            if let Some(id) = opt_str(&state, "entity_id") {
                index.states.insert(id, state);
            }
        }
        for entry in list(entities) {
            if let Some(id) = opt_str(&entry, "entity_id") {
                index.entities.insert(id, (opt_str(&entry, "device_id"), opt_str(&entry, "area_id")));
            }
        }
        for device in list(devices) {
            if let Some(id) = opt_str(&device, "id") {
                index.devices.insert(id, opt_str(&device, "area_id"));
            }
        }
        for area in list(areas) {
            if let Some(id) = opt_str(&area, "area_id") {
                let name = opt_str(&area, "name").unwrap_or_else(|| id.clone());
                index.areas.insert(id, name);
            }
        }
        index
    }

    /// The area id meant by `area`: an id, or a name (case-insensitive).
    pub fn area_id(&self, area: &str) -> Option<String> {
        if self.areas.contains_key(area) {
            return Some(area.to_owned());
        }
        self.areas.iter().find(|(_, name)| name.eq_ignore_ascii_case(area.trim())).map(|(id, _)| id.clone())
    }

    /// The area of `entity_id`: its own, else its device's.
    pub fn area_of(&self, entity_id: &str) -> Option<&str> {
        let (device, area) = self.entities.get(entity_id)?;
        area.as_deref().or_else(|| device.as_ref().and_then(|d| self.devices.get(d)).and_then(|a| a.as_deref()))
    }

    /// Every entity HA knows (states and registry).
    fn all_entities(&self) -> impl Iterator<Item = &String> {
        self.states.keys().chain(self.entities.keys().filter(|e| !self.states.contains_key(*e)))
    }
}

/// What a call would touch.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Touched {
    /// Entities, groups expanded.
    pub entities: BTreeSet<String>,
    /// Target parts that could not be resolved (`floor_id: upstairs`).
    pub unresolved: Vec<String>,
}

fn values(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => s.split(',').map(|p| p.trim().to_owned()).filter(|p| !p.is_empty()).collect(),
        Value::Array(items) => items.iter().filter_map(Value::as_str).map(|s| s.trim().to_owned()).collect(),
        _ => Vec::new(),
    }
}

/// The call's `entity_id` values as HA reads them: trimmed and lower-cased (HA lower-cases entity
/// ids and the word `all`, so `Lock.Front_Door` and `ALL` act like `lock.front_door` and `all`),
/// one list. What is resolved and checked is then exactly what is sent.
pub fn normalise_entity_ids(target: &mut Map<String, Value>) {
    if let Some(ids) = target.get("entity_id") {
        let ids: Vec<Value> = values(ids).into_iter().map(|id| Value::String(id.to_lowercase())).collect();
        target.insert("entity_id".into(), Value::Array(ids));
    }
}

/// The entities a call of `domain` with `target` would touch.
pub fn touched(index: &HomeIndex, domain: &str, target: &Map<String, Value>) -> Touched {
    let mut out = Touched::default();
    for id in target.get("entity_id").map(values).unwrap_or_default() {
        if id == "all" {
            // `homeassistant.*` with `all` acts on every entity; other domains on their own.
            let all =
                index.all_entities().filter(|e| domain == "homeassistant" || e.starts_with(&format!("{domain}.")));
            out.entities.extend(all.cloned());
        } else {
            out.entities.insert(id);
        }
    }
    for area in target.get("area_id").map(values).unwrap_or_default() {
        match index.area_id(&area) {
            Some(area) => {
                let inside = index.all_entities().filter(|e| index.area_of(e) == Some(area.as_str()));
                out.entities.extend(inside.cloned());
            }
            None => out.unresolved.push(format!("area_id: {area}")),
        }
    }
    for device in target.get("device_id").map(values).unwrap_or_default() {
        let on_device: Vec<String> = index
            .entities
            .iter()
            .filter(|(_, (d, _))| d.as_deref() == Some(device.as_str()))
            .map(|(e, _)| e.clone())
            .collect();
        if on_device.is_empty() {
            out.unresolved.push(format!("device_id: {device}"));
        }
        out.entities.extend(on_device);
    }
    for key in ["floor_id", "label_id"] {
        for value in target.get(key).map(values).unwrap_or_default() {
            out.unresolved.push(format!("{key}: {value}"));
        }
    }
    expand_groups(index, &mut out.entities);
    out
}

/// Adds the members of groups (any entity whose state lists `entity_id` members), a few
/// levels deep.
fn expand_groups(index: &HomeIndex, entities: &mut BTreeSet<String>) {
    let mut frontier: Vec<String> = entities.iter().cloned().collect();
    for _ in 0..GROUP_DEPTH {
        let mut next = Vec::new();
        for entity in &frontier {
            let members = index.states.get(entity).and_then(|s| s.get("attributes")).and_then(|a| a.get("entity_id"));
            for member in members.map(values).unwrap_or_default() {
                if entities.insert(member.clone()) {
                    next.push(member);
                }
            }
        }
        if next.is_empty() {
            break;
        }
        frontier = next;
    }
}

/// What makes a call sensitive.
#[derive(Debug, Clone, Default)]
pub struct Sensitivity {
    /// Domains whose entities are sensitive.
    pub domains: Vec<String>,
    /// Entities that are sensitive.
    pub entities: Vec<String>,
    /// Domains whose services may run without an entity target and without asking (a call of
    /// any other domain that resolves to no entity asks: it may act on everything).
    pub harmless_domains: Vec<String>,
}

impl Sensitivity {
    /// Why a call of `domain.service` touching `touched` needs approval; `None` when it does not.
    /// Names are compared lower-cased, as HA reads them.
    pub fn reason(&self, domain: &str, service: &str, touched: &Touched) -> Option<String> {
        let (domain, service) = (domain.to_lowercase(), service.to_lowercase());
        let domain = domain.as_str();
        if ALWAYS_SENSITIVE.contains(&domain) {
            return Some(format!("{domain} calls can act on anything"));
        }
        if ALWAYS_SENSITIVE_SERVICES.contains(&format!("{domain}.{service}").as_str()) {
            return Some(format!("{domain}.{service} acts on Home Assistant itself"));
        }
        if self.domains.iter().any(|d| d.eq_ignore_ascii_case(domain)) {
            return Some(format!("{domain} is a sensitive domain"));
        }
        let sensitive: Vec<&str> = touched
            .entities
            .iter()
            .filter(|e| {
                let entity_domain = e.split_once('.').map_or("", |(d, _)| d);
                self.entities.iter().any(|s| s.eq_ignore_ascii_case(e))
                    || self.domains.iter().any(|d| d.eq_ignore_ascii_case(entity_domain))
                    || ALWAYS_SENSITIVE.contains(&entity_domain)
            })
            .map(String::as_str)
            .collect();
        if !sensitive.is_empty() {
            let mut shown = sensitive.iter().take(10).copied().collect::<Vec<_>>().join(", ");
            if sensitive.len() > 10 {
                shown.push_str(&format!(" and {} more", sensitive.len() - 10));
            }
            return Some(format!("it touches {shown}"));
        }
        if !touched.unresolved.is_empty() {
            return Some(format!("its target could not be resolved ({})", touched.unresolved.join(", ")));
        }
        if touched.entities.is_empty() && !self.harmless_domains.iter().any(|d| d.eq_ignore_ascii_case(domain)) {
            return Some(format!("it names no entity, and a {domain} service without one may act on everything"));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn index() -> HomeIndex {
        HomeIndex::from_results(
            &json!([
                {"entity_id": "lock.front_door", "state": "locked", "attributes": {}},
                {"entity_id": "light.hall", "state": "on", "attributes": {}},
                {"entity_id": "light.kitchen", "state": "off", "attributes": {}},
                {"entity_id": "group.entrance", "state": "on", "attributes": {"entity_id": ["light.hall", "group.inner"]}},
                {"entity_id": "group.inner", "state": "on", "attributes": {"entity_id": ["lock.front_door"]}},
            ]),
            &json!([
                {"entity_id": "lock.front_door", "device_id": "dev-lock", "area_id": null},
                {"entity_id": "light.hall", "device_id": null, "area_id": "hall"},
                {"entity_id": "light.kitchen", "device_id": null, "area_id": "kitchen"},
            ]),
            &json!([{"id": "dev-lock", "area_id": "hall", "name": "Front lock"}]),
            &json!([{"area_id": "hall", "name": "Hallway"}, {"area_id": "kitchen", "name": "Kitchen"}]),
        )
    }

    fn target(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    fn sensitivity() -> Sensitivity {
        Sensitivity {
            domains: vec!["lock".into(), "cover".into()],
            entities: vec!["light.kitchen".into()],
            harmless_domains: vec!["light".into(), "notify".into()],
        }
    }

    #[test]
    fn areas_devices_all_and_groups_resolve_to_entities() {
        let index = index();
        let by_area = touched(&index, "homeassistant", &target(json!({"area_id": "Hallway"})));
        assert_eq!(by_area.entities, BTreeSet::from(["light.hall".into(), "lock.front_door".into()]), "device's area");
        let by_device = touched(&index, "homeassistant", &target(json!({"device_id": ["dev-lock"]})));
        assert_eq!(by_device.entities, BTreeSet::from(["lock.front_door".into()]));
        let all_lights = touched(&index, "light", &target(json!({"entity_id": "all"})));
        assert_eq!(all_lights.entities, BTreeSet::from(["light.hall".into(), "light.kitchen".into()]));
        let everything = touched(&index, "homeassistant", &target(json!({"entity_id": "all"})));
        assert!(everything.entities.contains("lock.front_door"));
        let group = touched(&index, "homeassistant", &target(json!({"entity_id": "group.entrance"})));
        assert!(group.entities.contains("lock.front_door"), "nested group expanded: {group:?}");
        let floor = touched(&index, "light", &target(json!({"floor_id": "upstairs", "area_id": "attic"})));
        assert_eq!(floor.unresolved, vec!["area_id: attic".to_owned(), "floor_id: upstairs".to_owned()]);
    }

    #[test]
    fn sensitive_calls_are_named_with_their_reason() {
        let index = index();
        let rules = sensitivity();
        let reason = |domain: &str, t: Value| rules.reason(domain, "turn_on", &touched(&index, domain, &target(t)));
        assert!(
            reason("homeassistant", json!({"entity_id": "lock.front_door"}))
                .is_some_and(|r| r.contains("lock.front_door"))
        );
        assert!(reason("homeassistant", json!({"area_id": "hall"})).is_some());
        assert_eq!(reason("light", json!({"entity_id": "light.hall"})), None);
        assert!(reason("light", json!({"entity_id": "light.kitchen"})).is_some(), "a listed entity");
        assert!(reason("lock", json!({})).is_some(), "a sensitive domain without a target");
        for domain in ALWAYS_SENSITIVE {
            assert!(reason(domain, json!({})).is_some_and(|r| r.contains("anything")), "{domain}");
        }
        assert!(reason("homeassistant", json!({"entity_id": "script.bedtime"})).is_some(), "scripts by entity too");
        assert!(reason("light", json!({"floor_id": "upstairs"})).is_some_and(|r| r.contains("could not be resolved")));
    }

    #[test]
    fn case_untargeted_calls_and_calls_on_home_assistant_itself_ask() {
        let index = index();
        let rules = sensitivity();
        let reason = |domain: &str, service: &str, t: Value| {
            let mut t = target(t);
            normalise_entity_ids(&mut t);
            rules.reason(domain, service, &touched(&index, &domain.to_lowercase(), &t))
        };
        // HA lower-cases entity ids and `all`: neither the case of the id nor of the word hides one.
        assert!(reason("homeassistant", "turn_off", json!({"entity_id": "LOCK.Front_Door"})).is_some());
        assert!(reason("homeassistant", "turn_off", json!({"entity_id": ["Light.Kitchen"]})).is_some());
        assert!(reason("homeassistant", "turn_off", json!({"entity_id": "ALL"})).is_some_and(|r| r.contains("lock")));
        assert!(reason("Lock", "unlock", json!({})).is_some(), "a sensitive domain in capitals");
        // No entity target: only harmless domains go without asking.
        assert_eq!(reason("light", "turn_on", json!({})), None);
        assert_eq!(reason("notify", "mobile_app_phone", json!({})), None);
        assert!(reason("homeassistant", "turn_off", json!({})).is_some_and(|r| r.contains("names no entity")));
        assert!(reason("vacuum", "start", json!({})).is_some());
        // Home Assistant itself: always asked.
        for (domain, service) in [
            ("homeassistant", "restart"),
            ("homeassistant", "stop"),
            ("recorder", "purge"),
            ("hassio", "host_shutdown"),
            ("backup", "create"),
        ] {
            assert!(reason(domain, service, json!({"entity_id": "light.hall"})).is_some(), "{domain}.{service}");
        }
        assert_eq!(reason("light", "turn_on", json!({"entity_id": "Light.Hall"})), None);
    }
}
