/**
 * `@attnlab/transformer/node`: Node-only parts of the package (file system). Training
 * checkpoints: {@link saveCheckpoint}, {@link loadCheckpoint}, {@link loadModel}.
 *
 * @packageDocumentation
 */
export { CHECKPOINT_FORMAT, CheckpointError, loadCheckpoint, loadModel, saveCheckpoint, type LoadedCheckpoint } from './checkpoint.ts'
