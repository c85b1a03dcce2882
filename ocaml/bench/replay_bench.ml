(* Replays a trace through Larch_context into a new store and prints its context operations
   per second of process CPU time (as `larch replay` reports them) and of wall time, as JSON.
   Usage: replay_bench.exe TRACE STORE [SYNC] [consume]
   (SYNC as `larch replay --sync`, default never; `consume`: a change whose input context the
   trace forgets consumes it, ~consume:true, as the Rust replayer moves such a tree) *)

let () =
  let trace, store, sync, consume =
    match Array.to_list Sys.argv with
    | [_; trace; store] -> (trace, store, "never", false)
    | [_; trace; store; sync] -> (trace, store, sync, false)
    | [_; trace; store; sync; "consume"] -> (trace, store, sync, true)
    | _ ->
        prerr_endline "usage: replay_bench.exe TRACE STORE [SYNC] [consume]" ;
        exit 2
  in
  let cpu () =
    let t = Unix.times () in
    t.Unix.tms_utime +. t.Unix.tms_stime
  in
  let cpu0 = cpu () and wall0 = Unix.gettimeofday () in
  let index = Larch_context.init ~sync store in
  let commits, ops = Support.replay ~consume ~index trace in
  Larch_context.close index ;
  let cpu_s = cpu () -. cpu0 and wall_s = Unix.gettimeofday () -. wall0 in
  Printf.printf
    "{\"context_ops\": %d, \"commits\": %d, \"cpu_s\": %.3f, \"wall_s\": %.3f, \
     \"context_ops_per_s\": %.0f, \"context_ops_per_wall_s\": %.0f}\n"
    ops
    (List.length commits)
    cpu_s
    wall_s
    (float_of_int ops /. cpu_s)
    (float_of_int ops /. wall_s)
