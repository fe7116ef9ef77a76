// One abortable sleep for services and the SDK alike: it lives in libs/bus, which both import.
export { sleep } from '@sandstream/bus';
