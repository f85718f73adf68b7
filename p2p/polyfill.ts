/**
 * Node 20 lacks `Promise.withResolvers` (a Node 22 API) which libp2p's dependencies call.
 * Every entry point imports this module first; it is a no-op on newer runtimes.
 */
interface Resolvers<T> {
  promise: Promise<T>;
  resolve: (value: T | PromiseLike<T>) => void;
  reject: (reason?: unknown) => void;
}

const PromiseWithResolvers = Promise as unknown as { withResolvers?: <T>() => Resolvers<T> };

if (typeof PromiseWithResolvers.withResolvers !== 'function') {
  PromiseWithResolvers.withResolvers = function withResolvers<T>(): Resolvers<T> {
    let resolve!: Resolvers<T>['resolve'];
    let reject!: Resolvers<T>['reject'];
    const promise = new Promise<T>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { promise, resolve, reject };
  };
}

export {};
