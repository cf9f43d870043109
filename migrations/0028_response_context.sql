-- hermesd schema 28: the messages a Responses API conversation opened with (the earlier input
-- items of its first request, JSON), carried by each of its responses, so that
-- `previous_response_id` gives the model the whole conversation and not only what hermesd said.
ALTER TABLE api_responses ADD COLUMN context TEXT;
