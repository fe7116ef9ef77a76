export { ApiStatusError } from './api-status.js';
export { STANDIN_LABEL } from './docker-pod-runner.js';
export { type KubeApiStandin, type KubeApiStandinOptions, startKubeApiStandin } from './kube-api-standin.js';
