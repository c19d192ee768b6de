-- Up Migration

-- What a redelivery sweep under way has seen of the delivery GUIDs it has not
-- decided yet. GitHub lists an App's delivery attempts newest first, page by
-- page, and one GUID's attempts can sit on several pages in either order: a
-- failed redelivery by hand of a delivery that was answered long ago is
-- listed pages before its OK original, a repaired one's OK redelivery pages
-- before its failed original. The sweeper decides a GUID only once it has
-- seen every attempt of it in the window (its original, the oldest, or the
-- window's end), so what it saw on the pages before its cursor is kept here,
-- with the cursor: a sweep resumed or taken over by another host knows it
-- too. Rows of a decided GUID go when the page that decided it is done, and
-- every row when the sweep finishes or a new one begins; what stays while a
-- sweep runs is one row per GUID redelivered within its window whose original
-- it has not reached yet.
CREATE TABLE wharf.redelivery_seen (
  app_id    bigint  NOT NULL,
  source    text    NOT NULL,
  guid      text    NOT NULL,
  -- GitHub's id of the newest failed attempt in the window (NULL: none failed).
  failed_id bigint,
  -- The GUID's event type, for the sweeper's logs.
  event     text,
  -- An attempt was answered 2xx: Wharf took it (stored, or refused on purpose).
  answered  boolean NOT NULL DEFAULT false,
  -- Its original was on the page under way: decided, and forgotten with that page.
  decided   boolean NOT NULL DEFAULT false,
  PRIMARY KEY (app_id, source, guid),
  FOREIGN KEY (app_id, source) REFERENCES wharf.redelivery_sweep (app_id, source) ON DELETE CASCADE
);

-- Down Migration

DROP TABLE wharf.redelivery_seen;
