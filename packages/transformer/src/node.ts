/**
 * `@attnlab/transformer/node`: Node-only parts of the package (file system). Training
 * checkpoints: {@link saveCheckpoint}, {@link loadCheckpoint}, {@link loadCheckpointModel}.
 *
 * @packageDocumentation
 */
export {
  CHECKPOINT_FORMAT,
  CheckpointError,
  loadCheckpoint,
  loadCheckpointModel,
  saveCheckpoint,
  saveCheckpointOptionsSchema,
  type LoadedCheckpoint,
  type SaveCheckpointOptions,
} from './checkpoint.ts'
