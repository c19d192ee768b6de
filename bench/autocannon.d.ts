// The part of autocannon 8's API the receiver benchmark uses (the package ships no types).
declare module 'autocannon' {
  interface AutocannonRequest {
    method?: string;
    path?: string;
    headers?: Record<string, string>;
    body?: string;
    setupRequest?: (request: AutocannonRequest) => AutocannonRequest;
  }
  interface AutocannonOptions {
    url: string;
    connections?: number;
    amount?: number;
    /** How often it samples its counters, in ms (default 1000); a run of `amount` requests ends at the first sample after them. */
    sampleInt?: number;
    method?: string;
    requests?: AutocannonRequest[];
  }
  interface AutocannonResult {
    duration: number;
    requests: { total: number; average: number };
    non2xx: number;
    errors: number;
    timeouts: number;
    '2xx': number;
  }
  function autocannon(options: AutocannonOptions): Promise<AutocannonResult>;
  export default autocannon;
}
