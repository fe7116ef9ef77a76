import { z } from 'zod';

/**
 * The messages of E2B's `filesystem.Filesystem` service (services/api/proto/filesystem/filesystem.proto) in
 * Connect's JSON form, as far as this server reads them: StatRequest{path=1},
 * ListDirRequest{path=1,depth=2}, MakeDirRequest{path=1}, RemoveRequest{path=1},
 * MoveRequest{source=1,destination=2}. EntryInfo{name=1,type=2,path=3,size=4,mode=5,
 * permissions=6,owner=7,group=8,modified_time=9,symlink_target=10} is answered as JSON
 * (int64 size as a string, the Timestamp as RFC 3339, FileType by name).
 */
export const PathRequestSchema = z.object({ path: z.string().min(1, 'path is required') });
export const ListDirRequestSchema = z.object({
  path: z.string().min(1, 'path is required'),
  depth: z.number().int().min(1, 'depth is at least 1').default(1),
});
export const MoveRequestSchema = z.object({
  source: z.string().min(1, 'source is required'),
  destination: z.string().min(1, 'destination is required'),
});

/** WatchDirRequest{path=1,recursive=2,include_entry=3,allow_network_mounts=4} (false is left out). */
export const WatchDirRequestSchema = z.strictObject({
  path: z.string().min(1, 'path is required'),
  recursive: z.boolean().optional(),
  includeEntry: z.boolean().optional(),
  allowNetworkMounts: z.boolean().optional(),
});
export type WatchDirRequest = z.infer<typeof WatchDirRequestSchema>;

export const FileTypeSchema = z.enum([
  'FILE_TYPE_UNSPECIFIED',
  'FILE_TYPE_FILE',
  'FILE_TYPE_DIRECTORY',
  'FILE_TYPE_SYMLINK',
]);
export type FileType = z.infer<typeof FileTypeSchema>;

export interface EntryInfo {
  name: string;
  type: FileType;
  path: string;
  size: string;
  mode: number;
  permissions: string;
  owner: string;
  group: string;
  modifiedTime?: string;
  symlinkTarget?: string;
}
