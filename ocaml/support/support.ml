(* Helpers of the OCaml tests and benchmark: environment, temporary directories, commands,
   hex, the replay of a trace through Larch_context. *)

module C = Larch_context

(* A required environment variable: a test never skips for lack of it, it fails. *)
let env name =
  match Sys.getenv_opt name with
  | Some v when v <> "" -> v
  | _ ->
      failwith
        (Printf.sprintf
           "%s is not set: run the OCaml tests through scripts/test-ocaml.sh"
           name)

let larch_bin () = env "LARCH_BIN"

let counter = ref 0

(* A new directory under $LARCH_SCRATCH (or the system's temporary directory). *)
let temp_dir name =
  incr counter ;
  let base =
    match Sys.getenv_opt "LARCH_SCRATCH" with
    | Some d when d <> "" -> d
    | _ -> Filename.get_temp_dir_name ()
  in
  let dir =
    Filename.concat
      base
      (Printf.sprintf "larch-ocaml-%d-%d-%s" (Unix.getpid ()) !counter name)
  in
  ignore (Sys.command (Printf.sprintf "rm -rf %s" (Filename.quote dir))) ;
  Unix.mkdir dir 0o755 ;
  dir

let remove_dir dir =
  ignore (Sys.command (Printf.sprintf "rm -rf %s" (Filename.quote dir)))

(* Runs a command; returns (exit code, stdout). *)
let run args =
  let cmd = String.concat " " (List.map Filename.quote args) in
  let ic = Unix.open_process_in (cmd ^ " 2>/dev/null") in
  let buf = Buffer.create 4096 in
  (try
     while true do
       Buffer.add_channel buf ic 1
     done
   with End_of_file -> ()) ;
  let code =
    match Unix.close_process_in ic with
    | Unix.WEXITED c -> c
    | Unix.WSIGNALED _ | Unix.WSTOPPED _ -> 255
  in
  (code, Buffer.contents buf)

let run_ok args =
  let code, out = run args in
  if code <> 0 then
    failwith
      (Printf.sprintf "command failed (%d): %s" code (String.concat " " args)) ;
  out

let hex = C.to_hex

let unhex = function "-" -> "" | h -> C.of_hex h

(* Every match of group 1 of [re] in [text], in order. *)
let all_matches re text =
  let re = Str.regexp re in
  let rec go pos acc =
    match Str.search_forward re text pos with
    | exception Not_found -> List.rev acc
    | _ -> go (Str.match_end ()) (Str.matched_group 1 text :: acc)
  in
  go 0 []

(* The operations of a trace, read a batch at a time (Larch_raw.trace_next_batch, encoded as
   ocaml/larch-ocaml/src/trace.rs says) and decoded here: [next ()] is the next operation as
   (kind, input, output, forget_input, path, path2, value, found, hash, date, message, parents),
   [None] at the end. *)
let trace_reader trace =
  let buf = ref Bytes.empty and pos = ref 0 in
  let byte () =
    let v = Bytes.get_uint8 !buf !pos in
    incr pos ;
    v
  in
  let u32 () =
    let v = Int32.to_int (Bytes.get_int32_le !buf !pos) land 0xFFFF_FFFF in
    pos := !pos + 4 ;
    v
  in
  let i64 () =
    let v = Bytes.get_int64_le !buf !pos in
    pos := !pos + 8 ;
    v
  in
  let bytes () =
    let n = u32 () in
    let b = Bytes.sub !buf !pos n in
    pos := !pos + n ;
    b
  in
  let strings () =
    let rec go k acc =
      if k = 0 then List.rev acc else go (k - 1) (Bytes.unsafe_to_string (bytes ()) :: acc)
    in
    go (u32 ()) []
  in
  let rec next () =
    if !pos < Bytes.length !buf then (
      let kind = byte () in
      let forget = byte () = 1 in
      let found = byte () = 1 in
      let input = Int64.to_int (i64 ()) in
      let out = Int64.to_int (i64 ()) in
      let date = i64 () in
      let path = strings () in
      let path2 = strings () in
      let value = bytes () in
      let hash = bytes () in
      let message = bytes () in
      let parents = List.map Bytes.of_string (strings ()) in
      Some
        (kind, input, out, forget, path, path2, value, found, hash, date, message, parents))
    else
      match Larch_raw.trace_next_batch trace 512 with
      | Error e -> failwith e
      | Ok b when Bytes.length b = 0 -> None
      | Ok b ->
          buf := b ;
          pos := 0 ;
          next ()
  in
  next

(* The replay of a trace through Larch_context, as larch-bench's replayer does it: context 0 is
   the empty tree; outputs are bound (and dropped at once when forgotten), forgotten inputs are
   dropped after use; every read and every commit hash is checked against the trace. With
   [consume], a change whose input the trace forgets consumes it (~consume:true), as the Rust
   replayer moves such a tree. Returns
   the commit hashes made, in order, and the number of context operations (checkouts and
   commits excluded, as `larch replay` counts them). *)
let replay ?(consume = false) ~index trace_path =
  let trace =
    match Larch_raw.trace_open trace_path with
    | Ok t -> t
    | Error e -> failwith e
  in
  let contexts = Hashtbl.create 1024 in
  Hashtbl.replace contexts 0 (C.empty index) ;
  let take id forget =
    match Hashtbl.find_opt contexts id with
    | None -> failwith (Printf.sprintf "replay: unknown context %d" id)
    | Some ctxt ->
        if forget then Hashtbl.remove contexts id ;
        ctxt
  in
  let bind id ctxt = Hashtbl.replace contexts id ctxt in
  let commits = ref [] in
  let ops = ref 0 in
  let next = trace_reader trace in
  let rec loop () =
    match next () with
    | None -> ()
    | Some
        ( kind,
          input,
          out,
          forget,
          path,
          path2,
          value,
          found,
          hash,
          date,
          message,
          parents ) ->
        (* Context operations, as larch replay counts them: not checkouts nor commits. *)
        if kind <> 0 && kind <> 7 then incr ops ;
        (match kind with
        | 0 -> (
            match C.checkout index (Bytes.to_string hash) with
            | Some ctxt -> bind out ctxt
            | None -> failwith "replay: checkout of an unknown commit")
        | 1 -> bind out (C.add ~consume:(consume && forget) (take input forget) path value)
        | 2 -> bind out (C.remove ~consume:(consume && forget) (take input forget) path)
        | 3 -> (
            let ctxt = take input forget in
            match C.copy ~consume:(consume && forget) ctxt ~from:path ~to_:path2 with
            | Some ctxt -> bind out ctxt
            | None -> failwith "replay: copy from a missing path")
        | 4 ->
            let got = C.find (take input forget) path <> None in
            if got <> found then failwith "replay: find differs from the trace"
        | 5 ->
            if C.mem (take input forget) path <> found then
              failwith "replay: mem differs from the trace"
        | 6 ->
            if C.mem_tree (take input forget) path <> found then
              failwith "replay: mem_tree differs from the trace"
        | 7 ->
            let ctxt = take input forget in
            let parents = List.map Bytes.to_string parents in
            let made =
              C.commit
                ~time:date
                ~message:(Bytes.to_string message)
                ~parents
                ctxt
            in
            if made <> Bytes.to_string hash then
              failwith
                (Printf.sprintf
                   "replay: commit %s, the trace says %s"
                   (hex made)
                   (hex (Bytes.to_string hash))) ;
            commits := made :: !commits
        | k -> failwith (Printf.sprintf "replay: unknown operation kind %d" k)) ;
        loop ()
  in
  loop () ;
  (List.rev !commits, !ops)
