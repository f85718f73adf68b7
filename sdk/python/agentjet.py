"""AgentJet SDK for Python agents. One file, standard library only (urllib, threads): copy it anywhere.

Two ways to take part in training:

1. Per episode (the runner starts your script once per episode)::

       ep = agentjet.episode_from_env()        # ep.task, ep.base_url, ep.api_key, ep.model
       ... call the model with any OpenAI-compatible client ...
       agentjet.report_result(reward=1.0)      # prints the final {"reward": ...} line

2. Long-running (your process begins and ends many episodes at once, like a swarm client)::

       swarm = agentjet.SwarmClient()          # AGENTJET_SWARM_URL + AGENTJET_CLIENT_KEY
       summary = swarm.run(tasks, agent, model="tiny", concurrency=8, repeat=4)

   where ``agent(episode, task)`` returns the reward (a number or {"reward": n, ...}).
"""
import json
import re
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

__all__ = ["AgentJetError", "Episode", "EpisodeEnv", "SwarmClient", "chat", "episode_from_env", "report_result"]

_TIMEOUT_S = 30
_RETRY_STATUSES = (0, 429, 503)


class AgentJetError(Exception):
    def __init__(self, message, status=0, error_name="AgentJetError"):
        super().__init__(message)
        self.status = status
        self.error_name = error_name


class EpisodeEnv:
    """The episode the runner started this process for."""

    def __init__(self, task, task_id, kind, episode_id, base_url, api_key, model):
        self.task = task
        self.task_id = task_id
        self.kind = kind
        self.episode_id = episode_id
        self.base_url = base_url
        self.anthropic_base_url = anthropic_base_url_of(base_url)
        # Anthropic clients take the origin (they append /v1/messages): the same gateway, the same key.
        self.api_key = api_key
        self.model = model


def anthropic_base_url_of(base_url):
    """The Anthropic clients' base URL for an OpenAI one: the origin, without ``/v1``."""
    return re.sub(r"/v1/?$", "", base_url)


def episode_from_env(role=None, env=None):
    """Reads the episode from the environment; ``role`` picks a team member's model (proposer, verifier, ...)."""
    env = os.environ if env is None else env
    suffix = "_" + role.upper() if role else ""

    def need(name):
        if name not in env:
            raise AgentJetError(name + " is not set: run this script through `agentjet attach` (or set it yourself)")
        return env[name]

    return EpisodeEnv(
        task=json.loads(need("AGENTJET_TASK")),
        task_id=env.get("AGENTJET_TASK_ID", ""),
        kind="eval" if env.get("AGENTJET_EPISODE_KIND") == "eval" else "train",
        episode_id=need("AGENTJET_EPISODE_ID" + suffix),
        base_url=need("OPENAI_BASE_URL" + suffix),
        api_key=need("OPENAI_API_KEY" + suffix),
        model=need("AGENTJET_MODEL" + suffix),
    )


def report_result(reward=None, rewards=None, success=None, metrics=None):
    """Prints the result line the runner reads; it must be the last line on stdout."""
    if (reward is None) == (rewards is None):
        raise AgentJetError("give reward (one model) or rewards (role -> reward for a team)")
    result = {"reward": float(reward)} if rewards is None else {"rewards": {k: float(v) for k, v in rewards.items()}}
    if success is not None:
        result["success"] = bool(success)
    if metrics:
        result["metrics"] = metrics
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def _request(method, url, key, body=None):
    data = None if body is None else json.dumps(body).encode("utf-8")
    headers = {"authorization": "Bearer " + key}
    if data is not None:
        headers["content-type"] = "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=_TIMEOUT_S) as res:
            text = res.read().decode("utf-8")
    except urllib.error.HTTPError as err:
        text = err.read().decode("utf-8", "replace")
        try:
            error = json.loads(text).get("error", {})
        except ValueError:
            error = {}
        message = error.get("message", text[:200]) if isinstance(error, dict) else text[:200]
        name = error.get("name", "HttpError") if isinstance(error, dict) else "HttpError"
        raise AgentJetError("%s %s: %d %s" % (method, url, err.code, message), err.code, name) from None
    except urllib.error.URLError as err:
        raise AgentJetError("%s %s: unreachable (%s)" % (method, url, err.reason), 0, "NetworkError") from None
    return json.loads(text) if text else {}


def chat(base_url, api_key, model, messages, **params):
    """One chat completion through an OpenAI-compatible endpoint; returns the assistant message dict."""
    body = dict(params, model=model, messages=messages)
    answer = _request("POST", base_url.rstrip("/") + "/chat/completions", api_key, body)
    return answer["choices"][0]["message"]


class Episode:
    """One running episode: give base_url / api_key / model to your client, then end() or abort()."""

    def __init__(self, swarm, episode_id, base_url, api_key, model, policy_version):
        self._swarm = swarm
        self.id = episode_id
        self.base_url = base_url
        self.anthropic_base_url = anthropic_base_url_of(base_url)
        self.api_key = api_key
        self.model = model
        self.policy_version = policy_version
        self._closed = False

    def chat(self, messages, **params):
        return chat(self.base_url, self.api_key, self.model, messages, **params)

    def end(self, reward, success=None, metrics=None):
        self._closed = True
        body = {"reward": float(reward)}
        if success is not None:
            body["success"] = bool(success)
        if metrics:
            body["metrics"] = metrics
        self._swarm._call("POST", "/episodes/%s/end" % self.id, body)

    def abort(self, reason):
        if self._closed:
            return
        self._closed = True
        self._swarm._call("POST", "/episodes/%s/abort" % self.id, {"reason": (reason or "aborted")[:2000]})


class SwarmClient:
    """Talks to a peer's swarm protocol (/swarm/v1) with a client key."""

    def __init__(self, url=None, key=None):
        url = url or os.environ.get("AGENTJET_SWARM_URL")
        key = key or os.environ.get("AGENTJET_CLIENT_KEY")
        if not url or not key:
            raise AgentJetError("give url and key, or set AGENTJET_SWARM_URL and AGENTJET_CLIENT_KEY")
        self.url = url.rstrip("/")
        self._key = key

    def _call(self, method, path, body=None):
        return _request(method, self.url + path, self._key, body)

    def begin(self, model, task_id, kind="train", idle_timeout_s=None, retries=5):
        """Starts an episode; a busy server (503, 429) is retried with backoff."""
        body = {"model": model, "taskId": str(task_id), "kind": kind}
        if idle_timeout_s is not None:
            body["idleTimeoutS"] = idle_timeout_s
        for attempt in range(retries + 1):
            try:
                answer = self._call("POST", "/episodes", body)
                break
            except AgentJetError as err:
                if err.status not in _RETRY_STATUSES or attempt == retries:
                    raise
                time.sleep(min(10.0, 0.2 * 2 ** attempt))
        return Episode(self, answer["episodeId"], answer["baseUrl"], answer["apiKey"], answer["model"], answer["policyVersion"])

    def status(self):
        return self._call("GET", "/status")

    def run(self, tasks, agent, model, concurrency=4, repeat=1, kind="train", task_id=None):
        """Runs ``agent(episode, task)`` on every task ``repeat`` times, ``concurrency`` episodes at once.

        The agent returns the reward (a number or {"reward": n, "success"?, "metrics"?}); one that raises aborts
        its episode (never trained on) and the run goes on. Returns {"ended", "aborted", "mean_reward", "errors"}.
        """
        task_id = task_id or (lambda t: str(t["id"]))
        lock = threading.Lock()
        summary = {"ended": 0, "aborted": 0, "mean_reward": None, "errors": []}
        rewards = []

        def one(task):
            episode = self.begin(model, task_id(task), kind)
            try:
                result = agent(episode, task)
                if isinstance(result, (int, float)):
                    result = {"reward": result}
                if not isinstance(result, dict) or not isinstance(result.get("reward"), (int, float)):
                    raise AgentJetError("the agent must return a number or {'reward': number}")
            except Exception as err:  # noqa: BLE001 — any agent failure aborts only its episode
                reason = "%s: %s" % (type(err).__name__, err)
                episode.abort(reason)
                with lock:
                    summary["aborted"] += 1
                    summary["errors"].append(reason)
                return
            episode.end(result["reward"], result.get("success"), result.get("metrics"))
            with lock:
                summary["ended"] += 1
                rewards.append(float(result["reward"]))

        jobs = [task for task in tasks for _ in range(repeat)]
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            for future in [pool.submit(one, job) for job in jobs]:
                future.result()
        summary["mean_reward"] = sum(rewards) / len(rewards) if rewards else None
        return summary
