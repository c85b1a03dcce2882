(* The OCaml tests of the bindings (docs/ocaml.md), run by scripts/test-ocaml.sh, which sets
   LARCH_BIN (the larch binary), LARCH_VECTORS (Irmin 3.7.2's hash vectors as lines, written by
   vectors_to_lines.py from the repository's copy) and LARCH_TRACE (a small generated trace). *)

open Support
module C = Larch_context

let check_hex what expected got = Alcotest.(check string) what expected (hex got)

let key_of = function
  | "-" -> []
  | text -> List.map unhex (String.split_on_char '/' text)

(* ---- Irmin's hash vectors, every case, through Larch_context ---- *)

type vcommit = {
  index : int;
  from : int;
  date : int64;
  author : string;
  message : string;
  parents : int list;
  mutable adds : (string list * string) list;
  mutable removes : string list list;
  mutable tree : string;
  mutable probes : (string list * string) list;
  mutable commit_hash : string option;
}

let read_vectors path =
  let ic = open_in path in
  let cases = ref [] in
  let current = ref None in
  let commits = ref [] in
  (try
     while true do
       let line = input_line ic in
       match String.split_on_char ' ' line with
       | ["case"; name] ->
           current := Some name ;
           commits := []
       | ["commit"; index; from; date; author; message; parents] ->
           commits :=
             {
               index = int_of_string index;
               from = int_of_string from;
               date = Int64.of_string date;
               author = unhex author;
               message = unhex message;
               parents =
                 (if parents = "-" then []
                 else List.map int_of_string (String.split_on_char ',' parents));
               adds = [];
               removes = [];
               tree = "";
               probes = [];
               commit_hash = None;
             }
             :: !commits
       | ["add"; p; v] ->
           let c = List.hd !commits in
           c.adds <- (key_of p, unhex v) :: c.adds
       | ["remove"; p] ->
           let c = List.hd !commits in
           c.removes <- key_of p :: c.removes
       | ["tree"; h] -> (List.hd !commits).tree <- h
       | ["probe"; p; h] ->
           let c = List.hd !commits in
           c.probes <- (key_of p, h) :: c.probes
       | ["commit_hash"; h] -> (List.hd !commits).commit_hash <- Some h
       | ["commit_error"] -> ()
       | ["end"] -> (
           match !current with
           | Some name -> cases := (name, List.rev !commits) :: !cases
           | None -> failwith "vectors: end without case")
       | _ -> failwith ("vectors: bad line " ^ line)
     done
   with End_of_file -> close_in ic) ;
  List.rev !cases

let run_case (name, commits) =
  let dir = temp_dir "vectors" in
  let index = C.init (Filename.concat dir "store") in
  let made = Hashtbl.create 8 in
  List.iter
    (fun c ->
      let at = Printf.sprintf "%s commit %d" name c.index in
      let ctxt =
        if c.from < 0 then C.empty index
        else C.checkout_exn index (Hashtbl.find made c.from)
      in
      let ctxt =
        List.fold_left
          (fun ctxt (k, v) -> C.add ctxt k (Bytes.of_string v))
          ctxt
          (List.rev c.adds)
      in
      let ctxt = List.fold_left C.remove ctxt (List.rev c.removes) in
      check_hex (at ^ ": tree hash") c.tree (C.Tree.hash (C.get_tree ctxt)) ;
      List.iter
        (fun (k, h) ->
          match C.find_tree ctxt k with
          | None -> Alcotest.failf "%s: probe %s missing" at (String.concat "/" k)
          | Some t -> check_hex (at ^ ": probe") h (C.Tree.hash t))
        c.probes ;
      let parents = List.map (Hashtbl.find made) c.parents in
      let predicted =
        C.hash ~time:c.date ~author:c.author ~message:c.message ~parents ctxt
      in
      let commit =
        C.commit ~time:c.date ~author:c.author ~message:c.message ~parents ctxt
      in
      Alcotest.(check string) (at ^ ": hash = commit") (hex predicted) (hex commit) ;
      (match c.commit_hash with
      | Some h -> check_hex (at ^ ": commit hash") h commit
      | None ->
          (* Irmin's Tezos configuration refuses to commit the empty tree; larch commits it
             (the case empty_tree_commit_allow_empty gives Irmin's hash then). *)
          Alcotest.(check bool) (at ^ ": refused tree is empty") true
            (C.Tree.is_empty (C.get_tree ctxt))) ;
      Alcotest.(check bool) (at ^ ": exists") true (C.exists index commit) ;
      let reread = C.checkout_exn index commit in
      check_hex (at ^ ": tree hash after reload") c.tree
        (C.Tree.hash (C.get_tree reread)) ;
      Hashtbl.replace made c.index commit)
    commits ;
  C.close index ;
  remove_dir dir ;
  List.length commits

let test_vectors () =
  let cases = read_vectors (env "LARCH_VECTORS") in
  Alcotest.(check bool) "23 cases" true (List.length cases >= 23) ;
  let commits = List.fold_left (fun n case -> n + run_case case) 0 cases in
  Alcotest.(check int) "every commit of the vectors" 34 commits ;
  Alcotest.(check bool)
    "mainnet genesis among them"
    true
    (List.mem_assoc "tezos_mainnet_genesis" cases)

(* The mainnet genesis commit, spelled out (Octez's commit_genesis: protocol, test_chain). *)
let test_genesis () =
  let dir = temp_dir "genesis" in
  let index = C.init (Filename.concat dir "store") in
  let ctxt = C.empty index in
  let ctxt = C.add ctxt ["data"; "version"] (Bytes.of_string "genesis") in
  let protocol =
    C.of_hex "38ecdef0cd08640f318a9b055f6b0d0c9ae030913a871d9b9d86fb846317da21"
  in
  let ctxt = C.add ctxt ["protocol"] (Bytes.of_string protocol) in
  let ctxt = C.add ctxt ["test_chain"] (Bytes.make 1 '\000') in
  let commit = C.commit ~time:1530374852L ~message:"Genesis" ctxt in
  Alcotest.(check string)
    "genesis hash"
    "CoV8SQumiVU9saiu3FVNeDNewJaJH8yWdsGF3WLdsRr2P9S7MzCj"
    (C.hash_to_b58 commit) ;
  C.close index ;
  remove_dir dir

(* ---- A trace replayed through the OCaml API gives the Rust replay's commits ---- *)

let log_hashes store =
  all_matches {|"hash": "\(Co[A-Za-z0-9]+\)"|} (run_ok [larch_bin (); "log"; store; "--json"])

let test_replay () =
  let trace = env "LARCH_TRACE" in
  let dir = temp_dir "replay" in
  let ocaml_store = Filename.concat dir "ocaml" in
  let index = C.init ~sync:"never" ocaml_store in
  let commits, ops = replay ~index trace in
  C.close index ;
  (* Again, consuming the contexts the trace forgets: the same commits. *)
  let index = C.init ~sync:"never" (Filename.concat dir "consumed") in
  let consumed, _ = replay ~consume:true ~index trace in
  C.close index ;
  Alcotest.(check (list string)) "consuming replay" (List.map hex commits) (List.map hex consumed) ;
  Alcotest.(check bool) "some commits" true (List.length commits > 5) ;
  Alcotest.(check bool) "some operations" true (ops > 100) ;
  let rust_store = Filename.concat dir "rust" in
  ignore (run_ok [larch_bin (); "replay"; trace; "--store"; rust_store]) ;
  let rust = log_hashes rust_store in
  let ours = List.rev_map C.hash_to_b58 commits in
  Alcotest.(check (list string)) "the Rust replay's commits" rust ours ;
  Alcotest.(check (list string)) "the OCaml store's log" rust (log_hashes ocaml_store) ;
  remove_dir dir

(* ---- fold: every depth constraint, both orders, against `larch ls` ---- *)

(* A store whose head has directories of 1, 40 and 300 entries (more than 32: Irmin's layout
   order differs from the sorted one), values at several depths. *)
let fold_store dir =
  let index = C.init (Filename.concat dir "store") in
  let ctxt = ref (C.empty index) in
  let add k v = ctxt := C.add !ctxt k (Bytes.of_string v) in
  for i = 0 to 299 do
    add ["big"; Printf.sprintf "k%d" i] (string_of_int i)
  done ;
  for i = 0 to 39 do
    add ["mid"; Printf.sprintf "d%d" i; "v"] "x" ;
    if i mod 7 = 0 then add ["mid"; Printf.sprintf "d%d" i; "w"; "deep"] "y"
  done ;
  add ["one"; "only"] "1" ;
  add ["top"] "t" ;
  let commit = C.commit ~time:0L ~message:"fold" !ctxt in
  (index, commit)

(* The listing of a directory by `larch ls --json`: (name, is_directory), in Irmin's order. *)
let ls_cache = Hashtbl.create 64

let ls store path =
  match Hashtbl.find_opt ls_cache (store, path) with
  | Some listing -> listing
  | None ->
  let out = run_ok [larch_bin (); "ls"; store; String.concat "/" path; "--json"] in
  let kinds = all_matches {|"kind": "\([a-z]+\)"|} out in
  let names = all_matches {|"name": "\([^"]*\)"|} out in
  let listing = List.combine names (List.map (fun k -> k = "directory") kinds) in
  Hashtbl.replace ls_cache (store, path) listing ;
  listing

(* What Irmin 3.7.2's fold reports (tree.ml: a directory at depth d is reported and entered
   by these rules; a value at depth d is reported by the second), walking `larch ls`
   listings. *)
let expected_fold store root depth sorted =
  let report_node, enter_node =
    match depth with
    | None -> ((fun _ -> true), fun _ -> true)
    | Some (`Eq n) -> ((fun d -> d >= n), fun d -> d < n)
    | Some (`Le n) -> ((fun _ -> true), fun d -> d < n)
    | Some (`Lt n) -> ((fun _ -> true), fun d -> d < n - 1)
    | Some (`Ge n) -> ((fun d -> d >= n), fun _ -> true)
    | Some (`Gt n) -> ((fun d -> d > n), fun _ -> true)
  in
  let report_value d =
    match depth with
    | None -> true
    | Some (`Eq n) -> d = n
    | Some (`Le n) -> d <= n
    | Some (`Lt n) -> d < n
    | Some (`Ge n) -> d >= n
    | Some (`Gt n) -> d > n
  in
  let out = ref [] in
  let rec node rel d =
    if report_node d then out := String.concat "/" rel :: !out ;
    if enter_node d then
      let entries = ls store (root @ rel) in
      let entries =
        if sorted then List.sort (fun (a, _) (b, _) -> compare a b) entries
        else entries
      in
      List.iter
        (fun (name, is_dir) ->
          let rel = rel @ [name] in
          if is_dir then node rel (d + 1)
          else if report_value (d + 1) then out := String.concat "/" rel :: !out)
        entries
  in
  node [] 0 ;
  List.rev !out

let test_fold () =
  let dir = temp_dir "fold" in
  let index, commit = fold_store dir in
  C.sync index ;
  let store = Filename.concat dir "store" in
  let ctxt = C.checkout_exn index commit in
  let depths =
    None
    :: List.concat_map
         (fun n -> [Some (`Eq n); Some (`Le n); Some (`Lt n); Some (`Ge n); Some (`Gt n)])
         [0; 1; 2; 3]
  in
  let checked = ref 0 in
  List.iter
    (fun root ->
      List.iter
        (fun depth ->
          List.iter
            (fun (order, sorted) ->
              let got =
                List.rev
                  (C.fold ?depth ctxt root ~order ~init:[] ~f:(fun k _ acc ->
                       String.concat "/" k :: acc))
              in
              let expected = expected_fold store root depth sorted in
              incr checked ;
              Alcotest.(check (list string))
                (Printf.sprintf
                   "fold /%s %s %s"
                   (String.concat "/" root)
                   (match depth with
                   | None -> "no depth"
                   | Some (`Eq n) -> Printf.sprintf "Eq %d" n
                   | Some (`Le n) -> Printf.sprintf "Le %d" n
                   | Some (`Lt n) -> Printf.sprintf "Lt %d" n
                   | Some (`Ge n) -> Printf.sprintf "Ge %d" n
                   | Some (`Gt n) -> Printf.sprintf "Gt %d" n)
                   (if sorted then "sorted" else "undefined"))
                expected
                got)
            [(`Undefined, false); (`Sorted, true)])
        depths)
    [[]; ["mid"]; ["big"]] ;
  Alcotest.(check int) "every combination" (3 * 21 * 2) !checked ;
  (* The large directory's layout order is not the sorted one (else the test shows nothing). *)
  let names = List.map fst (C.list ctxt ["big"]) in
  Alcotest.(check bool) "layout order differs" true (names <> List.sort compare names) ;
  (* Pages of `list` are the slices of `larch ls --offset --length`. *)
  List.iter
    (fun (offset, length) ->
      let out =
        run_ok
          [larch_bin (); "ls"; store; "big"; "--json"; "--offset"; string_of_int offset;
           "--length"; string_of_int length]
      in
      Alcotest.(check (list string))
        (Printf.sprintf "page %d+%d" offset length)
        (all_matches {|"name": "\([^"]*\)"|} out)
        (List.map fst (C.list ctxt ~offset ~length ["big"])))
    [(0, 10); (31, 5); (290, 20); (300, 3); (0, 0)] ;
  C.close index ;
  remove_dir dir

(* Irmin's order around a commit: a context modified in memory lists by name; once committed,
   the same context lists in its layout order, as a checkout of the commit and `larch ls` do. *)
let test_list_around_commit () =
  let dir = temp_dir "listorder" in
  let store = Filename.concat dir "store" in
  let index = C.init store in
  let ctxt = ref (C.empty index) in
  for i = 0 to 299 do
    ctxt := C.add !ctxt ["big"; Printf.sprintf "n%d" i] (Bytes.of_string "v")
  done ;
  let names ctxt = List.map fst (C.list ctxt ["big"]) in
  let before = names !ctxt in
  Alcotest.(check (list string)) "modified: by name" (List.sort compare before) before ;
  let commit = C.commit ~time:0L !ctxt in
  let after = names !ctxt in
  Alcotest.(check (list string)) "committed: as its checkout"
    (names (C.checkout_exn index commit)) after ;
  Alcotest.(check bool) "committed: not by name" true (after <> before) ;
  C.sync index ;
  Alcotest.(check (list string)) "committed: as larch ls"
    (all_matches {|"name": "\([^"]*\)"|} (run_ok [larch_bin (); "ls"; store; "big"; "--json"]))
    after ;
  let changed = C.add !ctxt ["big"; "n7"] (Bytes.of_string "w") in
  Alcotest.(check (list string)) "changed again: by name" (List.sort compare after) (names changed) ;
  C.close index ;
  remove_dir dir

(* ---- The collector: trees and contexts stay valid, whatever it frees ---- *)

let test_gc_full_major () =
  let dir = temp_dir "gc" in
  let index = C.init (Filename.concat dir "store") in
  let ctxt = ref (C.empty index) in
  let trees = ref [] in
  for i = 0 to 499 do
    ctxt := C.add !ctxt ["a"; string_of_int (i mod 37); string_of_int i] (Bytes.of_string (string_of_int i)) ;
    if i mod 50 = 0 then Gc.full_major () ;
    trees := (i, C.get_tree !ctxt, C.Tree.of_value (C.empty index) (Bytes.of_string (string_of_int i))) :: !trees
  done ;
  Gc.full_major () ;
  let c1 = C.commit ~time:1L ~message:"one" !ctxt in
  Gc.full_major () ;
  (* A checkout of another context, then more changes: the old trees must not move. *)
  let other = C.add (C.checkout_exn index c1) ["b"] (Bytes.of_string "b") in
  let c2 = C.commit ~time:2L ~message:"two" other in
  ignore (C.checkout_exn index c2) ;
  Gc.full_major () ;
  List.iter
    (fun (i, tree, value) ->
      let k = ["a"; string_of_int (i mod 37); string_of_int i] in
      Alcotest.(check (option string))
        "value in an old tree"
        (Some (string_of_int i))
        (Option.map Bytes.to_string (C.Tree.find tree k)) ;
      Alcotest.(check (option string))
        "of_value"
        (Some (string_of_int i))
        (Option.map Bytes.to_string (C.Tree.to_value value)) ;
      if i < 499 then
        Alcotest.(check bool) "not the newest yet" false (C.Tree.mem tree ["a"; "0"; "499"]))
    !trees ;
  Alcotest.(check int) "500 trees alive" 500 (List.length !trees) ;
  trees := [] ;
  Gc.full_major () ;
  Alcotest.(check bool) "c1 still readable" true
    (C.mem (C.checkout_exn index c1) ["a"; "5"; "5"]) ;
  C.close index ;
  Gc.full_major () ;
  remove_dir dir

(* ---- Errors are exceptions carrying larch's text ---- *)

(* [Proof_tests.raises_error]: an exception carrying larch's text. *)
let raises_error = Proof_tests.raises_error

let test_errors () =
  let dir = temp_dir "errors" in
  let index = C.init (Filename.concat dir "store") in
  let ctxt = C.add (C.empty index) ["a"] (Bytes.of_string "value") in
  let commit = C.commit ~time:0L ctxt in
  let unknown = String.make 32 '\001' in
  Alcotest.(check bool) "unknown: not there" false (C.exists index unknown) ;
  Alcotest.(check bool) "unknown: no checkout" true (C.checkout index unknown = None) ;
  raises_error "checkout_exn of an unknown hash" (fun () -> C.checkout_exn index unknown) ;
  raises_error "gc to an unknown hash" (fun () -> C.gc index unknown) ;
  raises_error "a hash of 3 bytes" (fun () -> C.exists index "abc") ;
  (* A value is not a directory: reading through it finds nothing, as in Irmin. *)
  Alcotest.(check bool) "find through a value" true (C.find ctxt ["a"; "b"] = None) ;
  raises_error "snapshot of an unknown hash" (fun () ->
      C.export_snapshot index unknown ~path:(Filename.concat dir "x.snap")) ;
  let next = C.add ~consume:true ctxt ["b"] (Bytes.of_string "b") in
  raises_error "a consumed context" (fun () -> C.find ctxt ["a"]) ;
  raises_error "a consumed context, again" (fun () -> C.add ~consume:true ctxt ["c"] Bytes.empty) ;
  Alcotest.(check bool) "what consumed it" true (C.mem next ["a"] && C.mem next ["b"]) ;
  let ctxt = C.checkout_exn index commit in
  raises_error "a negative list offset" (fun () -> C.list ctxt ~offset:(-1) []) ;
  raises_error "a rejected proof" (fun () ->
      C.Proof.verify_tree_proof (Bytes.of_string "garbage") [C.Proof.Find ["a"]]) ;
  (match Larch_raw.test_panic () with
  | Ok () -> Alcotest.fail "a panic came back as Ok"
  | Error text ->
      Alcotest.(check bool) "a panic is an Error" true
        (Str.string_match (Str.regexp ".*panic") text 0)) ;
  let lazy_ctxt = C.checkout_exn index commit in
  C.close index ;
  (* A checkout loads lazily: after the close, its reads come from the closed store's files. *)
  Alcotest.(check (option string)) "a checkout outlives its index" (Some "value")
    (Option.map Bytes.to_string (C.find lazy_ctxt ["a"])) ;
  raises_error "checkout on a closed index" (fun () -> C.checkout index commit) ;
  raises_error "commit on a closed index" (fun () -> C.commit ~time:1L ctxt) ;
  raises_error "a context from a closed index" (fun () -> C.empty index) ;
  (* What was read stays readable. *)
  Alcotest.(check (option string)) "a context outlives its index" (Some "value")
    (Option.map Bytes.to_string (C.find ctxt ["a"])) ;
  raises_error "opening a missing store read-only" (fun () ->
      C.init ~readonly:true (Filename.concat dir "missing")) ;
  remove_dir dir

(* ---- Contexts stay values: a change moves the tree, the input is rebuilt when used ---- *)

let test_old_contexts () =
  let seed =
    match Sys.getenv_opt "LARCH_SEED" with
    | Some s -> int_of_string s
    | None -> 42
  in
  Printf.printf "old contexts: seed %d (replay with LARCH_SEED=%d)\n%!" seed seed ;
  Random.init seed ;
  let dir = temp_dir "old" in
  let index = C.init (Filename.concat dir "store") in
  let base = ref (C.empty index) in
  for i = 0 to 299 do
    base := C.add !base ["big"; Printf.sprintf "n%d" i] (Bytes.of_string "v")
  done ;
  base := C.add !base ["a"; "b"; "c"] (Bytes.of_string "abc") ;
  let commit = C.commit ~time:0L !base in
  let names ctxt path = List.map fst (C.list ctxt path) in
  (* What each context is when made: its commit hash (nothing written) and two listings. *)
  let state ctxt = (C.hash ~time:0L ctxt, names ctxt ["big"], names ctxt ["a"]) in
  let n = 300 in
  let ctxts = Array.make n (C.checkout_exn index commit) in
  let states = Array.make n (state ctxts.(0)) in
  let consumed = Array.make n false in
  let key () =
    match Random.int 4 with
    | 0 -> ["big"; Printf.sprintf "n%d" (Random.int 320)]
    | 1 -> ["a"; "b"; Printf.sprintf "x%d" (Random.int 5)]
    | 2 -> ["a"; "b"; "c"; "d"]
    | _ -> [Printf.sprintf "t%d" (Random.int 3)]
  in
  for i = 1 to n - 1 do
    (* Mostly the newest context, sometimes an older one (rebuilt from the newer ones). *)
    let rec pick () =
      let j = if Random.int 4 = 0 then Random.int i else i - 1 in
      if consumed.(j) then pick () else j
    in
    let j = pick () in
    let consume = j = i - 1 && Random.int 10 = 0 in
    let input = ctxts.(j) in
    let made =
      match Random.int 6 with
      | 0 -> C.remove ~consume input (key ())
      | 1 -> (
          match C.copy ~consume input ~from:(key ()) ~to_:(key ()) with
          | Some c -> c
          | None -> C.add ~consume input (key ()) (Bytes.of_string "copy")
          )
      | _ -> C.add ~consume input (key ()) (Bytes.of_string (string_of_int i))
    in
    if consume then consumed.(j) <- true ;
    ctxts.(i) <- made ;
    states.(i) <- state made ;
    if i mod 50 = 0 then Gc.full_major ()
  done ;
  Gc.full_major () ;
  (* Every context, in a random order, is what it was when made. *)
  let order = Array.init n (fun i -> i) in
  for i = n - 1 downto 1 do
    let k = Random.int (i + 1) in
    let t = order.(i) in
    order.(i) <- order.(k) ;
    order.(k) <- t
  done ;
  Array.iter
    (fun i ->
      if consumed.(i) then raises_error "a consumed context" (fun () -> C.find ctxts.(i) ["a"])
      else
        let hash, big, a = states.(i) in
        let hash', big', a' = state ctxts.(i) in
        Alcotest.(check string) (Printf.sprintf "context %d: hash" i) (hex hash) (hex hash') ;
        Alcotest.(check (list string)) (Printf.sprintf "context %d: big" i) big big' ;
        Alcotest.(check (list string)) (Printf.sprintf "context %d: a" i) a a')
    order ;
  (* The checked-out context lists its stored directory in its stored order, not by name. *)
  let _, big0, _ = states.(0) in
  Alcotest.(check bool) "stored order kept" true (big0 <> List.sort compare big0) ;
  C.close index ;
  remove_dir dir

(* ---- GC, sync, snapshot export through the index ---- *)

let test_gc_sync_snapshot () =
  let dir = temp_dir "maintenance" in
  let store = Filename.concat dir "store" in
  let index = C.init store in
  let commits =
    List.init 5 (fun i ->
        let ctxt = C.add (C.empty index) ["level"] (Bytes.of_string (string_of_int i)) in
        C.commit ~time:(Int64.of_int i) ctxt)
  in
  let last = List.nth commits 4 in
  C.sync index ;
  C.gc index last ;
  Alcotest.(check bool) "the kept commit" true (C.exists index last) ;
  Alcotest.(check bool) "a collected commit" false (C.exists index (List.hd commits)) ;
  let snap = Filename.concat dir "head.snap" in
  C.export_snapshot index last ~path:snap ;
  C.close index ;
  ignore (run_ok [larch_bin (); "snapshot"; "verify"; snap]) ;
  let imported = Filename.concat dir "imported" in
  ignore (run_ok [larch_bin (); "snapshot"; "import"; snap; imported]) ;
  let index = C.init ~readonly:true imported in
  Alcotest.(check (option string)) "the snapshot's value" (Some "4")
    (Option.map Bytes.to_string (C.find (C.checkout_exn index last) ["level"])) ;
  C.close index ;
  remove_dir dir

(* ---- A long operation lets other OCaml threads run ---- *)

let test_runtime_lock () =
  let dir = temp_dir "threads" in
  let index = C.init (Filename.concat dir "store") in
  let ctxt = ref (C.empty index) in
  for i = 0 to 199_999 do
    ctxt := C.add !ctxt ["d"; string_of_int (i mod 1000); string_of_int i] (Bytes.of_string "v")
  done ;
  let ticks = ref 0 in
  let stop = ref false in
  let during = ref 0 in
  let spinner =
    Thread.create
      (fun () ->
        while not !stop do
          incr ticks ;
          Thread.yield ()
        done)
      ()
  in
  Thread.yield () ;
  let ctxt = !ctxt in
  (* The raw external, called with nothing to allocate on the way: no thread switch can happen
     between reading [ticks] and entering the commit, so the spinner can only have counted during
     it if the commit released the runtime lock. *)
  let before = !ticks in
  let commit = Larch_raw.commit ctxt 0L "Tezos" "" None in
  during := !ticks - before ;
  let commit = match commit with Ok h -> Bytes.to_string h | Error e -> failwith e in
  stop := true ;
  Thread.join spinner ;
  Alcotest.(check bool) "the commit is made" true (C.exists index commit) ;
  Alcotest.(check bool) "another thread ran during the commit" true (!during > 0) ;
  C.close index ;
  remove_dir dir

let () =
  Alcotest.run
    "larch-ocaml"
    [
      ( "hashes",
        [
          Alcotest.test_case "Irmin 3.7.2 vectors" `Quick test_vectors;
          Alcotest.test_case "mainnet genesis" `Quick test_genesis;
        ] );
      ("replay", [Alcotest.test_case "trace through the OCaml API" `Quick test_replay]);
      ("fold", [Alcotest.test_case "depths and orders vs larch ls" `Quick test_fold]);
      ("list", [Alcotest.test_case "Irmin's order around a commit" `Quick test_list_around_commit]);
      ("contexts", [Alcotest.test_case "old contexts after changes" `Quick test_old_contexts]);
      ("collector", [Alcotest.test_case "Gc.full_major with live trees" `Quick test_gc_full_major]);
      ("errors", [Alcotest.test_case "exceptions" `Quick test_errors]);
      ("proofs", [Alcotest.test_case "verified by larch proof verify" `Quick Proof_tests.test_proofs]);
      ("stream proofs", [Alcotest.test_case "produced, verified, tampered" `Quick Proof_tests.test_stream_proofs]);
      ("merkle_tree_v2", [Alcotest.test_case "Hole and Raw_context" `Quick Proof_tests.test_merkle_tree_v2]);
      ("tree2", [Alcotest.test_case "binary-tree proofs verified" `Quick Proof_tests.test_tree2]);
      ("index", [Alcotest.test_case "gc, sync, export_snapshot" `Quick test_gc_sync_snapshot]);
      ("threads", [Alcotest.test_case "commit releases the runtime lock" `Quick test_runtime_lock]);
    ]
