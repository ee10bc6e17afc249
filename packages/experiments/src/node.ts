/**
 * `@attnlab/experiments/node`: the Node-only side of the experiments, where writing their results
 * to files goes (the main entry, `@attnlab/experiments`, runs in any runtime and writes nothing).
 * Nothing is here yet: `compareWithDense` returns data and its reports are strings and plain
 * specs, which a caller writes with `@attnlab/core/node`'s `writeFileAtomic`.
 *
 * @module
 */
export {}
