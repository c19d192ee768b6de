-- Up Migration

-- GitHub never redelivers a failed delivery by itself: the redelivery sweeper
-- (recovery/) lists a GitHub App's webhook deliveries and asks GitHub to
-- redeliver every failed one that the inbox has not stored. These two tables
-- are its state; its functions are in sql/85-redelivery.sql.

-- Where the sweeps of one GitHub App (its id on its server) stand. A sweep
-- covers the deliveries after window_since up to about window_until; GitHub
-- lists them newest first, page by page, and page_cursor is GitHub's cursor
-- of the next page still to do, so a sweep that dies resumes there. The
-- lease lets one host at a time sweep the App, and another take over once it
-- expires.
CREATE TABLE wharf.redelivery_sweep (
  app_id          bigint      NOT NULL CHECK (app_id > 0),
  source          text        NOT NULL,
  -- Every delivery up to here has been swept (NULL: never).
  swept_until     timestamptz,
  -- The sweep under way (both NULL: none).
  window_since    timestamptz,
  window_until    timestamptz,
  -- GitHub's cursor of its next page (NULL: the first page).
  page_cursor     text,
  pages_done      integer     NOT NULL DEFAULT 0,
  leased_by       text,
  lease_token     uuid,
  leased_until    timestamptz,
  last_success_at timestamptz,
  last_error_at   timestamptz,
  -- An error class, never a message (which could quote a credential).
  last_error      text,
  PRIMARY KEY (app_id, source),
  CHECK ((window_since IS NULL) = (window_until IS NULL))
);

-- Every delivery GUID the sweeper asked GitHub to redeliver: the failed
-- attempt it asked about last (GitHub's delivery id), how often, and how the
-- ask ended. It keeps two sweepers from asking for the same attempt twice.
CREATE TABLE wharf.redelivery_request (
  app_id       bigint      NOT NULL,
  source       text        NOT NULL,
  guid         text        NOT NULL,
  delivery_id  bigint      NOT NULL,
  asks         integer     NOT NULL DEFAULT 1,
  -- 'asking': recorded, GitHub's answer not yet; 'accepted': GitHub will
  -- redeliver; 'failed': the ask did not get through; 'rejected': GitHub
  -- refused it (e.g. too old).
  outcome      text        NOT NULL DEFAULT 'asking'
                           CHECK (outcome IN ('asking', 'accepted', 'failed', 'rejected')),
  -- The sweep (its lease token) that asked.
  asked_by     uuid        NOT NULL,
  requested_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (app_id, source, guid),
  FOREIGN KEY (app_id, source) REFERENCES wharf.redelivery_sweep (app_id, source) ON DELETE CASCADE
);

-- Down Migration

DROP TABLE wharf.redelivery_request;
DROP TABLE wharf.redelivery_sweep;
