//! Toolset `homeassistant` (Hermes' names): `ha_list_entities(domain?, area?)`,
//! `ha_get_state(entity_id)`, `ha_call_service(domain, service, entity_id?, data?)`.
//!
//! The tools reach HA through the adapter's connection (`HassLink`, handed over by the host when
//! the platform is enabled); the token never reaches the model. A service call first resolves
//! the entities it would touch (`resolve.rs`) and asks a person when any is sensitive; nothing
//! is called before that answer, and where nobody can answer the call is refused.
//!
//! `ha_list_entities` filters by domain and area and lists at most `MAX_LISTED` (100). `HASS_TOKEN`
//! never reaches a tool result, a log line or `/readyz`.

pub mod resolve;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::{Approval, Tool, ToolContext, ToolError, ToolSpec};
use resolve::{HomeIndex, Sensitivity, TARGET_KEYS, normalise_entity_ids, touched};

/// The toolset's name.
pub const TOOLSET: &str = "homeassistant";
/// Most entities `ha_list_entities` lists.
pub const MAX_LISTED: usize = 100;
const MAX_RESULT_CHARS: usize = 12_000;

/// A connection to Home Assistant that sends one websocket command and returns its `result`.
#[async_trait]
pub trait HassLink: Send + Sync {
    /// Send `command` (`{"type": …, …}`, no `id`); the error text never carries the token.
    async fn command(&self, command: Value) -> Result<Value, String>;
}

/// What the tools share.
#[derive(Clone)]
pub struct HassTools {
    link: Arc<dyn HassLink>,
    sensitivity: Sensitivity,
    approval_timeout: Duration,
}

impl HassTools {
    /// Tools over `link`, asking approval for `sensitivity`, waiting `approval_timeout`.
    pub fn new(link: Arc<dyn HassLink>, sensitivity: Sensitivity, approval_timeout: Duration) -> Self {
        Self { link, sensitivity, approval_timeout }
    }

    /// The three tools, to register.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        vec![
            Arc::new(ListEntities(self.clone())),
            Arc::new(GetState(self.clone())),
            Arc::new(CallService(self.clone())),
        ]
    }

    async fn ask(&self, kind: &str) -> Result<Value, ToolError> {
        self.link
            .command(json!({ "type": kind }))
            .await
            .map_err(|e| ToolError::Failed(format!("home assistant {kind}: {e}")))
    }

    /// States, plus the registries when `registries` (areas and devices need them).
    async fn index(&self, registries: bool) -> Result<HomeIndex, ToolError> {
        let states = self.ask("get_states").await?;
        if !registries {
            return Ok(HomeIndex::from_results(&states, &Value::Null, &Value::Null, &Value::Null));
        }
        let entities = self.ask("config/entity_registry/list").await?;
        let devices = self.ask("config/device_registry/list").await?;
        let areas = self.ask("config/area_registry/list").await?;
        Ok(HomeIndex::from_results(&states, &entities, &devices, &areas))
    }
}

fn spec(name: &'static str, description: &'static str, parameters: Value, parallel_safe: bool) -> ToolSpec {
    ToolSpec {
        name: Cow::Borrowed(name),
        description: Cow::Borrowed(description),
        parameters,
        toolset: Cow::Borrowed(TOOLSET),
        parallel_safe,
        max_result_chars: MAX_RESULT_CHARS,
        timeout: Duration::from_secs(60),
    }
}

fn name_like(text: &str) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn entity_like(text: &str) -> bool {
    text.split_once('.').is_some_and(|(d, o)| name_like(d) && name_like(o))
}

fn arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
}

struct ListEntities(HassTools);

#[async_trait]
impl Tool for ListEntities {
    fn spec(&self) -> ToolSpec {
        spec(
            "ha_list_entities",
            "List Home Assistant entities with their state, optionally only one domain (light, \
             sensor, lock, …) and/or one area (id or name). At most 100 are listed.",
            json!({"type": "object", "properties": {
                "domain": {"type": "string", "description": "Only entities of this domain, e.g. light"},
                "area": {"type": "string", "description": "Only entities in this area (id or name)"}
            }}),
            true,
        )
    }

    async fn call(&self, _ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let domain = arg(&args, "domain");
        if domain.is_some_and(|d| !name_like(d)) {
            return Err(ToolError::InvalidArguments("domain must be a domain name such as \"light\"".into()));
        }
        let area = arg(&args, "area");
        let index = self.0.index(area.is_some()).await?;
        let area_id = match area {
            Some(area) => Some(index.area_id(area).ok_or_else(|| {
                let mut known: Vec<&str> = index.areas.values().map(String::as_str).collect();
                known.sort_unstable();
                ToolError::InvalidArguments(format!("no area {area:?}; areas: {}", known.join(", ")))
            })?),
            None => None,
        };
        let mut rows: Vec<(&String, &Value)> = index
            .states
            .iter()
            .filter(|(id, _)| domain.is_none_or(|d| id.strip_prefix(d).is_some_and(|rest| rest.starts_with('.'))))
            .filter(|(id, _)| area_id.as_deref().is_none_or(|a| index.area_of(id) == Some(a)))
            .collect();
        rows.sort_by(|a, b| a.0.cmp(b.0));
        if rows.is_empty() {
            return Ok("No entities match.".into());
        }
        let total = rows.len();
        let mut out = String::new();
        for (id, state) in rows.into_iter().take(MAX_LISTED) {
            let value = state.get("state").and_then(Value::as_str).unwrap_or("?");
            match state.get("attributes").and_then(|a| a.get("friendly_name")).and_then(Value::as_str) {
                Some(name) => out.push_str(&format!("{id} ({name}): {value}\n")),
                None => out.push_str(&format!("{id}: {value}\n")),
            }
        }
        if total > MAX_LISTED {
            out.push_str(&format!("… and {} more; narrow by domain or area.\n", total - MAX_LISTED));
        }
        Ok(out)
    }
}

struct GetState(HassTools);

#[async_trait]
impl Tool for GetState {
    fn spec(&self) -> ToolSpec {
        spec(
            "ha_get_state",
            "Get one Home Assistant entity's state and attributes.",
            json!({"type": "object", "properties": {
                "entity_id": {"type": "string", "description": "e.g. climate.living_room"}
            }, "required": ["entity_id"]}),
            true,
        )
    }

    async fn call(&self, _ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let entity = arg(&args, "entity_id").filter(|e| entity_like(e));
        let entity = entity.ok_or_else(|| ToolError::InvalidArguments("entity_id such as \"light.kitchen\"".into()))?;
        let index = self.0.index(false).await?;
        let state = index.states.get(entity).ok_or_else(|| ToolError::Failed(format!("no entity {entity}")))?;
        let shown = json!({
            "entity_id": entity,
            "state": state.get("state"),
            "attributes": state.get("attributes"),
            "last_changed": state.get("last_changed"),
        });
        serde_json::to_string_pretty(&shown).map_err(|e| ToolError::Failed(e.to_string()))
    }
}

struct CallService(HassTools);

/// A JSON object: a call's target or its service data.
type Object = Map<String, Value>;

impl CallService {
    /// The call's target: `entity_id` and any target keys from `data`, moved out of the data so
    /// what is resolved is exactly what is sent.
    fn split(args: &Value) -> Result<(Object, Object), ToolError> {
        let mut data = match args.get("data") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(data)) => data.clone(),
            Some(_) => return Err(ToolError::InvalidArguments("data must be an object".into())),
        };
        let mut target = Map::new();
        for key in TARGET_KEYS {
            if let Some(value) = data.remove(key) {
                target.insert(key.to_owned(), value);
            }
        }
        if let Some(entity) = args.get("entity_id").filter(|v| !v.is_null()) {
            let mut ids = match target.remove("entity_id") {
                Some(Value::Array(ids)) => ids,
                Some(other) => vec![other],
                None => Vec::new(),
            };
            match entity {
                Value::Array(more) => ids.extend(more.iter().cloned()),
                other => ids.push(other.clone()),
            }
            target.insert("entity_id".into(), Value::Array(ids));
        }
        Ok((target, data))
    }
}

#[async_trait]
impl Tool for CallService {
    fn spec(&self) -> ToolSpec {
        spec(
            "ha_call_service",
            "Call a Home Assistant service (light.turn_on, climate.set_temperature, …). Calls that \
             touch locks, alarms, covers, climate or other sensitive entities, and any script, \
             scene or automation, wait for the user's approval.",
            json!({"type": "object", "properties": {
                "domain": {"type": "string", "description": "e.g. light"},
                "service": {"type": "string", "description": "e.g. turn_on"},
                "entity_id": {"description": "Target entity id or list of ids",
                    "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
                "data": {"type": "object", "description": "Service data, e.g. {\"brightness_pct\": 50}; may hold area_id or device_id"}
            }, "required": ["domain", "service"]}),
            false,
        )
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let (Some(domain), Some(service)) = (arg(&args, "domain"), arg(&args, "service")) else {
            return Err(ToolError::InvalidArguments("domain and service are required".into()));
        };
        if !name_like(domain) || !name_like(service) {
            return Err(ToolError::InvalidArguments("domain and service are names such as light and turn_on".into()));
        }
        let (mut target, data) = Self::split(&args)?;
        normalise_entity_ids(&mut target);
        let index = self.0.index(target.keys().any(|k| k != "entity_id")).await?;
        let touched = touched(&index, domain, &target);
        if let Some(reason) = self.0.sensitivity.reason(domain, service, &touched) {
            let action = format!("call {domain}.{service} in Home Assistant ({reason})");
            match ctx.human.approve(&action, self.0.approval_timeout).await {
                Approval::Approved => {}
                Approval::Denied => return Err(ToolError::Denied(format!("the user refused {domain}.{service}"))),
                Approval::TimedOut => {
                    return Err(ToolError::Denied(format!("nobody approved {domain}.{service} in time")));
                }
                Approval::Unavailable => {
                    return Err(ToolError::Denied(format!(
                        "{domain}.{service} needs a person's approval ({reason}), and nobody can approve here"
                    )));
                }
            }
        }
        let mut command = json!({"type": "call_service", "domain": domain, "service": service, "service_data": data});
        if !target.is_empty() {
            command["target"] = Value::Object(target);
        }
        self.0
            .link
            .command(command)
            .await
            .map_err(|e| ToolError::Failed(format!("home assistant call_service {domain}.{service}: {e}")))?;
        let count = touched.entities.len();
        Ok(match count {
            0 => format!("Called {domain}.{service}."),
            n => format!("Called {domain}.{service} on {n} entit{}.", if n == 1 { "y" } else { "ies" }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_keys_move_out_of_data_and_entity_ids_merge() {
        let args = json!({"domain": "light", "service": "turn_on", "entity_id": "light.a",
            "data": {"brightness_pct": 50, "entity_id": ["light.b"], "area_id": "kitchen"}});
        let (target, data) = CallService::split(&args).expect("split");
        assert_eq!(Value::Object(target), json!({"entity_id": ["light.b", "light.a"], "area_id": "kitchen"}));
        assert_eq!(Value::Object(data), json!({"brightness_pct": 50}));
        assert!(CallService::split(&json!({"data": "x"})).is_err());
        assert!(entity_like("lock.front_door") && !entity_like("lock") && !entity_like("Lock.x"));
    }
}
