-- Every version of every blueprint (one row per version_id).
-- The renaming lives once, in `staged_blueprints` (sql/macros/staging.sql), shared with its twin.
select * from staged_blueprints('esper.blueprint_versions')
