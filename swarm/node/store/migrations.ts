/**
 * Versioned schema migrations for the peer's SQLite store. Each runs once, in order, inside a transaction;
 * `PRAGMA user_version` records the last one applied. Append new migrations; never edit an applied one.
 */
import type { Database } from 'better-sqlite3';
import { EPISODE_TEXT_BACKFILL_SQL, EPISODE_TEXT_TABLE_SQL, EPISODE_TEXT_TRIGGERS_SQL } from './episode-text.ts';
import { refreshRunTotals } from './run-totals.ts';

export interface Migration {
  version: number;
  name: string;
  up: (db: Database) => void;
}

export const migrations: Migration[] = [
  {
    version: 1,
    name: 'node metadata',
    up: (db) => {
      db.exec(`
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE runs (
          id TEXT PRIMARY KEY,
          started_at TEXT NOT NULL,
          stopped_at TEXT,
          version TEXT NOT NULL,
          args TEXT NOT NULL
        );
      `);
    },
  },
  {
    version: 2,
    name: 'episodes, calls, timelines, train steps',
    up: (db) => {
      // Token arrays are little-endian blobs (int32 ids, uint8 mask, float32 logprobs): 4 bytes a token instead of
      // ~7 as JSON text, and read back without parsing. Everything else that is structured is JSON text.
      db.exec(`
        CREATE TABLE episodes (
          id TEXT PRIMARY KEY,
          model TEXT NOT NULL,
          task_id TEXT NOT NULL,
          group_id TEXT NOT NULL,
          kind TEXT NOT NULL CHECK (kind IN ('train', 'eval')),
          state TEXT NOT NULL CHECK (state IN ('active', 'ended', 'aborted', 'trained', 'discarded')),
          reward REAL,
          success INTEGER,
          metrics TEXT,
          abort_reason TEXT,
          created_at TEXT NOT NULL,
          ended_at TEXT,
          client TEXT,
          script_hash TEXT,
          policy_version INTEGER NOT NULL,
          merge_mode TEXT,
          merge_savings TEXT
        );
        CREATE INDEX episodes_by_model ON episodes (model, created_at);
        CREATE INDEX episodes_by_group ON episodes (model, group_id, state);
        CREATE INDEX episodes_by_state ON episodes (state, created_at);

        CREATE TABLE calls (
          episode_id TEXT NOT NULL REFERENCES episodes (id) ON DELETE CASCADE,
          idx INTEGER NOT NULL,
          call_id TEXT NOT NULL,
          agent_key TEXT NOT NULL,
          messages TEXT NOT NULL,
          tools TEXT,
          assistant_message TEXT,
          finish_reason TEXT,
          prompt_ids BLOB NOT NULL,
          generated_ids BLOB NOT NULL,
          logprobs BLOB NOT NULL,
          policy_version INTEGER NOT NULL,
          started_at TEXT NOT NULL,
          first_token_at TEXT,
          ended_at TEXT NOT NULL,
          splice TEXT NOT NULL,
          PRIMARY KEY (episode_id, idx),
          UNIQUE (episode_id, call_id)
        );

        CREATE TABLE timelines (
          episode_id TEXT NOT NULL REFERENCES episodes (id) ON DELETE CASCADE,
          idx INTEGER NOT NULL,
          timeline_id TEXT NOT NULL,
          agent_key TEXT,
          tokens BLOB NOT NULL,
          loss_mask BLOB NOT NULL,
          logprobs BLOB NOT NULL,
          call_ids TEXT NOT NULL,
          policy_versions TEXT NOT NULL,
          spans TEXT NOT NULL,
          decisions TEXT NOT NULL,
          PRIMARY KEY (episode_id, idx)
        );

        CREATE TABLE train_steps (
          model TEXT NOT NULL,
          step INTEGER NOT NULL,
          policy_version INTEGER NOT NULL,
          metrics TEXT NOT NULL,
          created_at TEXT NOT NULL,
          PRIMARY KEY (model, step)
        );
      `);
    },
  },
  {
    version: 3,
    name: 'client runner: script versions and runs',
    up: (db) => {
      // One row per attached script version (hot swap keeps them all), one per run of a script (its episode ids —
      // a team has several —, the content hash that ran, the outcome, the bounded stdout/stderr), and the current
      // attachments.
      db.exec(`
        CREATE TABLE client_scripts (
          name TEXT NOT NULL,
          version INTEGER NOT NULL,
          hash TEXT NOT NULL,
          file TEXT NOT NULL,
          origin TEXT NOT NULL,
          options TEXT NOT NULL,
          attached_at TEXT NOT NULL,
          PRIMARY KEY (name, version)
        );
        CREATE TABLE client_runs (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          client TEXT NOT NULL,
          script_hash TEXT NOT NULL,
          episode_ids TEXT NOT NULL,
          task_id TEXT NOT NULL,
          kind TEXT NOT NULL CHECK (kind IN ('train', 'eval')),
          status TEXT NOT NULL CHECK (status IN ('ended', 'aborted')),
          reason TEXT,
          reward REAL,
          exit_code INTEGER,
          process_ms REAL,
          stdout TEXT NOT NULL,
          stderr TEXT NOT NULL,
          started_at TEXT NOT NULL,
          ended_at TEXT NOT NULL
        );
        CREATE INDEX client_runs_by_client ON client_runs (client, id);
        -- What is attached now, so a restarted peer picks its scripts up again (state: running, paused,
        -- broken, finished, detached; file: the snapshot of the current version).
        CREATE TABLE client_attachments (
          name TEXT PRIMARY KEY,
          version INTEGER NOT NULL,
          file TEXT NOT NULL,
          options TEXT NOT NULL,
          state TEXT NOT NULL,
          reason TEXT,
          updated_at TEXT NOT NULL
        );
      `);
    },
  },
  {
    version: 4,
    name: 'episode teams, cancelled calls, paging by time',
    up: (db) => {
      // team_id: the episodes of one team run (several roles, one task) share it. cancelled_calls: calls whose
      // client hung up before the answer was complete (not part of any timeline, but worth seeing).
      db.exec(`
        ALTER TABLE episodes ADD COLUMN team_id TEXT;
        ALTER TABLE episodes ADD COLUMN cancelled_calls INTEGER NOT NULL DEFAULT 0;
        CREATE INDEX episodes_by_time ON episodes (created_at);
        CREATE INDEX episodes_by_team ON episodes (team_id) WHERE team_id IS NOT NULL;
      `);
    },
  },
  {
    version: 5,
    name: 'full-text search over what was said in episodes',
    up: (db) => {
      // See episode-text.ts: an FTS5 table kept by a trigger on calls; the calls already stored are indexed here.
      db.exec(`${EPISODE_TEXT_TABLE_SQL};\n${EPISODE_TEXT_TRIGGERS_SQL}`);
      db.exec(EPISODE_TEXT_BACKFILL_SQL);
    },
  },
  {
    version: 6,
    name: 'client key generations (revocation)',
    up: (db) => {
      // A client's keys carry the generation they were minted in; raising it revokes every key minted before.
      db.exec(`
        CREATE TABLE client_keys (
          client TEXT PRIMARY KEY,
          generation INTEGER NOT NULL,
          revoked_at TEXT
        );
      `);
    },
  },
  {
    version: 7,
    name: 'which episodes each train step used, reverted steps, restored policy versions',
    up: (db) => {
      // train_step_episodes: the episodes a step trained on, written in the step's own transaction (train-steps.ts),
      // so "trained" always names its step. reverted_at: the step's update was lost (a restart went back to an older
      // checkpoint); its episodes were queued again. policy_restores: the fresh version given to weights restored
      // from a checkpoint, so that a version number is never handed out twice for different weights.
      db.exec(`
        ALTER TABLE train_steps ADD COLUMN reverted_at TEXT;
        CREATE TABLE train_step_episodes (
          model TEXT NOT NULL,
          step INTEGER NOT NULL,
          episode_id TEXT NOT NULL REFERENCES episodes (id) ON DELETE CASCADE,
          PRIMARY KEY (model, step, episode_id)
        );
        CREATE INDEX train_step_episodes_by_episode ON train_step_episodes (episode_id);
        CREATE TABLE policy_restores (
          model TEXT NOT NULL,
          policy_version INTEGER NOT NULL,
          checkpoint_step INTEGER NOT NULL,
          after_step INTEGER NOT NULL,
          created_at TEXT NOT NULL,
          PRIMARY KEY (model, policy_version)
        );
      `);
    },
  },
  {
    version: 8,
    name: "an aborted client run's reason as a code",
    up: (db) => {
      db.exec('ALTER TABLE client_runs ADD COLUMN code TEXT');
    },
  },
  {
    version: 9,
    name: 'training runs: configuration, status, events; peer starts renamed',
    up: (db) => {
      // "run" now means a training run (runs-api.ts); the table of the peer's starts says what it holds.
      // training_runs: one model trained from one starting point with one configuration. step_offset: model step =
      // run step + step_offset (a fresh run counts from 1, a continued one carries its parent's numbering on).
      // run_events: what happened on a run's curve that its steps do not say (start, resume, config change, stop).
      // Steps recorded before runs existed get one run per model, its configuration unknown ({}).
      db.exec(`
        ALTER TABLE runs RENAME TO peer_starts;
        CREATE TABLE training_runs (
          id TEXT PRIMARY KEY,
          seq INTEGER NOT NULL,
          name TEXT NOT NULL,
          model TEXT NOT NULL,
          status TEXT NOT NULL,
          start TEXT NOT NULL,
          config TEXT NOT NULL,
          config_hash TEXT NOT NULL,
          seed INTEGER NOT NULL,
          step_offset INTEGER NOT NULL,
          created_at TEXT NOT NULL,
          ended_at TEXT,
          warnings TEXT NOT NULL DEFAULT '[]',
          -- Totals of the standing steps, kept with each step (the runs list reads a thousand runs at once).
          steps INTEGER NOT NULL DEFAULT 0,
          last_step INTEGER NOT NULL DEFAULT 0,
          best_reward REAL,
          last_reward REAL
        );
        CREATE UNIQUE INDEX training_runs_by_seq ON training_runs (seq);
        CREATE INDEX training_runs_by_model ON training_runs (model, seq);
        CREATE TABLE run_events (
          run_id TEXT NOT NULL REFERENCES training_runs (id) ON DELETE CASCADE,
          step INTEGER NOT NULL,
          kind TEXT NOT NULL,
          label TEXT NOT NULL,
          detail TEXT NOT NULL,
          created_at TEXT NOT NULL
        );
        CREATE INDEX run_events_by_run ON run_events (run_id, step);
        ALTER TABLE train_steps ADD COLUMN run_id TEXT;
        CREATE INDEX train_steps_by_run ON train_steps (run_id, step);
        CREATE INDEX episodes_by_model_kind ON episodes (model, kind, created_at);
        -- The episodes list sorted by reward, highest or lowest first, episodes without one last either way.
        CREATE INDEX episodes_by_reward ON episodes (reward, created_at, id);
        CREATE INDEX episodes_by_reward_asc ON episodes ((reward IS NULL), reward, created_at, id);
      `);
      const models = db.prepare('SELECT model, MIN(created_at) AS first, MAX(created_at) AS last FROM train_steps GROUP BY model ORDER BY first').all() as {
        model: string;
        first: string;
        last: string;
      }[];
      let seq = 0;
      for (const { model, first, last } of models) {
        seq++;
        const id = `${model.replace(/[^A-Za-z0-9._-]/g, '_')}-${seq}`;
        db.prepare(
          `INSERT INTO training_runs (id, seq, name, model, status, start, config, config_hash, seed, step_offset, created_at, ended_at)
           VALUES (?, ?, ?, ?, 'stopped', ?, '{}', '', 0, 0, ?, ?)`,
        ).run(id, seq, id, model, JSON.stringify({ kind: 'source', source: 'unknown (recorded before runs)' }), first, last);
        db.prepare('UPDATE train_steps SET run_id = ? WHERE model = ?').run(id, model);
        refreshRunTotals(db, id);
      }
    },
  },
  {
    version: 10,
    name: 'studies',
    up: (db) => {
      // The research system: studies, the runs each planned (one row per arm, seed and step budget), what happened
      // to them, and the lab notebook of finished studies' findings.
      db.exec(`
        CREATE TABLE studies (
          id TEXT PRIMARY KEY,
          seq INTEGER NOT NULL UNIQUE,
          name TEXT NOT NULL,
          question TEXT NOT NULL,
          hypothesis TEXT NOT NULL,
          spec TEXT NOT NULL,
          source TEXT NOT NULL,
          base_dir TEXT NOT NULL,
          planner TEXT NOT NULL,
          status TEXT NOT NULL,
          reason TEXT,
          stage INTEGER NOT NULL DEFAULT 0,
          decision TEXT,
          analysis TEXT,
          created_at TEXT NOT NULL,
          ended_at TEXT
        );
        CREATE TABLE study_runs (
          id TEXT PRIMARY KEY,
          study_id TEXT NOT NULL REFERENCES studies (id) ON DELETE CASCADE,
          ord INTEGER NOT NULL,
          stage INTEGER NOT NULL,
          arm TEXT NOT NULL,
          params TEXT NOT NULL,
          plan TEXT NOT NULL,
          seed INTEGER NOT NULL,
          steps INTEGER NOT NULL,
          continues TEXT,
          dir TEXT NOT NULL,
          status TEXT NOT NULL,
          attempts INTEGER NOT NULL DEFAULT 0,
          reason TEXT,
          metric REAL,
          curve TEXT,
          started_at TEXT,
          ended_at TEXT,
          UNIQUE (study_id, stage, arm, seed, steps)
        );
        CREATE INDEX study_runs_by_study ON study_runs (study_id, ord);
        CREATE TABLE study_events (
          study_id TEXT NOT NULL REFERENCES studies (id) ON DELETE CASCADE,
          time TEXT NOT NULL,
          kind TEXT NOT NULL,
          message TEXT NOT NULL
        );
        CREATE INDEX study_events_by_study ON study_events (study_id, time);
        CREATE TABLE notebook (
          study_id TEXT PRIMARY KEY REFERENCES studies (id) ON DELETE CASCADE,
          question TEXT NOT NULL,
          decision TEXT NOT NULL,
          statement TEXT NOT NULL,
          created_at TEXT NOT NULL
        );
      `);
    },
  },
];
