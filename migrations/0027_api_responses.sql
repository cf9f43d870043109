-- hermesd schema 27: responses of the Responses API (`POST /v1/responses` with `store`), as the
-- client got them, for `GET /v1/responses/{id}` and `previous_response_id`, which continues the
-- API chat (`chat_id`) the response was given in. Pruned after `[retention] responses`.
CREATE TABLE api_responses (
    id         TEXT PRIMARY KEY,
    chat_id    TEXT NOT NULL,
    body       TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX api_responses_by_chat ON api_responses (chat_id, created_at);
CREATE INDEX api_responses_by_time ON api_responses (created_at);
