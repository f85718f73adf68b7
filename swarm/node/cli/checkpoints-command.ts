/** `agentjet checkpoints list MODEL | export MODEL STEP [--out FILE]`: the training checkpoints of the running peer. */
import type { CheckpointInfo } from '../../common/api.ts';
import { UsageError, type Command } from './command.ts';
import { dataDirOption, dataDirUsage, PeerClient, PeerRequestError } from './peer-client.ts';

/** How the peer's answer names the list of a model's checkpoints (its control-API route). */
const CHECKPOINTS_ROUTE = /GET \/api\/models\/\S+\/checkpoints/;

export const checkpointsCommand: Command = {
  name: 'checkpoints',
  summary: 'list a model’s training checkpoints, export one as a tar archive',
  usage: `agentjet checkpoints list MODEL | export MODEL STEP [--out FILE]

  list MODEL          newest first: step, policy version, time, folder
  export MODEL STEP   the checkpoint folder (a Hugging Face model folder or a PEFT adapter) as a tar archive,
                      written to --out FILE (default ./MODEL-step-STEP.tar)

Options:
${dataDirUsage}
  --out FILE        export: where to write the archive
  --json            list: print JSON`,
  options: { ...dataDirOption, out: { type: 'string' }, json: { type: 'boolean' } },
  positionals: { min: 2, max: 3, names: 'a subcommand and a model: list MODEL or export MODEL STEP' },
  async run(values, [sub, model, step]) {
    // Wrong usage is said before looking for a peer: it is wrong whether one runs or not.
    const client = () => PeerClient.fromDataDir(values);
    const base = `/models/${encodeURIComponent(model)}/checkpoints`;
    if (sub === 'list') {
      if (step !== undefined) throw new UsageError(`list takes only a model, got "${step}" too`);
      const { checkpoints } = await client().get<{ checkpoints: CheckpointInfo[] }>(base);
      if (values.json) process.stdout.write(JSON.stringify(checkpoints, null, 2) + '\n');
      else if (checkpoints.length === 0) process.stdout.write(`model ${model} has no checkpoint yet\n`);
      else
        process.stdout.write(
          [
            `${checkpoints.length} checkpoint(s) of ${model} (step, policy version, time, folder)`,
            ...checkpoints.map((c) => [c.step, `v${c.policyVersion}`, c.time, c.dir].join('  ')),
          ].join('\n') + '\n',
        );
      return 0;
    }
    if (sub !== 'export') throw new UsageError(`unknown subcommand "${sub}"; use list MODEL or export MODEL STEP`);
    if (step === undefined || !/^\d+$/.test(step)) throw new UsageError(`export needs the checkpoint's step number, got "${step ?? ''}"`);
    const file = (values.out as string | undefined) ?? `${model.replace(/[^A-Za-z0-9._-]/g, '_')}-step-${step}.tar`;
    const bytes = await client()
      .download(`${base}/${step}/archive`, file)
      .catch((err: unknown) => {
        // The peer's 404 names its HTTP route; on the command line the command that lists checkpoints helps more.
        if (!(err instanceof PeerRequestError)) throw err;
        throw new PeerRequestError(err.status, err.errorName, err.message.replace(CHECKPOINTS_ROUTE, `\`agentjet checkpoints list ${model}\``));
      });
    process.stderr.write(`wrote ${file} (${(bytes / 1e6).toFixed(1)} MB); unpack with: tar -xf ${file}\n`);
    return 0;
  },
};
