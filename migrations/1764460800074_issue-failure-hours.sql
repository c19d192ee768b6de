-- Up Migration

-- An issue's failures per hour, for the chart on its page (sql/97): a row
-- per issue and hour in which it failed, written by a trigger on wharf.issue
-- whenever its counts grow, so every path that counts into an issue (the
-- handlers' attempts, the destinations' deliveries) is charted alike. Rows
-- go with their issue, and purge_issues forgets those past the chart's
-- week. Issues of before this migration chart from the upgrade on.
CREATE TABLE wharf.issue_failure_hour (
  issue_id bigint NOT NULL REFERENCES wharf.issue (id) ON DELETE CASCADE,
  hour     timestamptz NOT NULL,
  failures bigint NOT NULL DEFAULT 0,
  dead     bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (issue_id, hour)
);
-- purge_issues: the hours past the chart's week, oldest first.
CREATE INDEX ix_issue_failure_hour_purge ON wharf.issue_failure_hour (hour);

-- Down Migration

DROP TABLE wharf.issue_failure_hour;
