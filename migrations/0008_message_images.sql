-- hermesd schema 8: images a message carries, as JSON references (path under the data dir and
-- MIME type), never their bytes; NULL for messages without images.
ALTER TABLE messages ADD COLUMN images TEXT;
